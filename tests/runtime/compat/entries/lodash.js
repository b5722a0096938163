import _ from "lodash";
globalThis.middleware.userMessageInbound = async (c) => {
  const words = _.words(c.text);
  return JSON.stringify({ kebab: _.kebabCase(c.text), chunks: _.chunk(words, 2), counts: _.countBy(words, (w) => w.length),
    merged: _.merge({ a: { b: 1 } }, { a: { c: 2 } }), clone: _.cloneDeep({ d: [1, { e: 2 }] }) });
};

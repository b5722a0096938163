import _ from "lodash";
globalThis.middleware.userMessageInbound = async (c) => {
  // lodash's template builds its function with a sloppy-mode `with` unless given a variable name.
  if (c.text.startsWith("template without variable")) return _.template("Hi <%- name %>!")({ name: c.text });
  const words = _.words(c.text);
  return JSON.stringify({ kebab: _.kebabCase(c.text), chunks: _.chunk(words, 2), counts: _.countBy(words, (w) => w.length),
    merged: _.merge({ a: { b: 1 } }, { a: { c: 2 } }), clone: _.cloneDeep({ d: [1, { e: 2 }] }),
    template: _.template("Hi <%- data.words[0] %>!", { variable: "data" })({ words }) });
};

import yaml from "js-yaml";
globalThis.middleware.userMessageInbound = async (c) => {
  const doc = yaml.load(c.text);
  doc.items.push("added");
  return yaml.dump(doc, { sortKeys: true });
};

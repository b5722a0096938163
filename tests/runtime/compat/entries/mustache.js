import Mustache from "mustache";
globalThis.middleware.userMessageInbound = async (c) =>
  Mustache.render("Hello {{name}}! {{#items}}<{{.}}>{{/items}} {{{raw}}} {{esc}}", JSON.parse(c.text));

import Handlebars from "handlebars";
Handlebars.registerHelper("shout", (s) => String(s).toUpperCase());
const template = Handlebars.compile("{{#each people}}{{shout name}} is {{age}}{{#unless @last}}, {{/unless}}{{/each}} <{{title}}>");
globalThis.middleware.userMessageInbound = async (c) => template(JSON.parse(c.text));

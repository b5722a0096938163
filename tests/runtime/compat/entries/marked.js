import { marked } from "marked";
// userMessageInbound: the text is Markdown; the handler hands on its HTML.
globalThis.middleware.userMessageInbound = async (c) => marked.parse(c.text);

import validator from "validator";
globalThis.middleware.userMessageInbound = async (c) => c.text.split(" ").map((w) =>
  validator.isEmail(w) ? "[email]" : validator.isURL(w, { require_protocol: true }) ? "[url]" : validator.escape(w)).join(" ");

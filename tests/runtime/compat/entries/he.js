import he from "he";
globalThis.middleware.userMessageInbound = async (c) => he.encode(he.decode(c.text), { useNamedReferences: true });

import { Filter } from "bad-words";
const filter = new Filter({ placeHolder: "*" });
filter.addWords("frobnicate");
globalThis.middleware.userMessageInbound = async (c) => filter.clean(c.text);

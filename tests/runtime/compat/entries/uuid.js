import { v4, v5, validate, version } from "uuid";
globalThis.middleware.userMessageInbound = async (c) => {
  const id = v4();
  return [validate(id), version(id), v5(c.text, v5.DNS), v4() !== id].join(" ");
};

import Ajv from "ajv";
const ajv = new Ajv({ allErrors: true });
const validate = ajv.compile({ type: "object", required: ["name", "age"], additionalProperties: false,
  properties: { name: { type: "string", minLength: 2 }, age: { type: "integer", minimum: 0 } } });
globalThis.middleware.userMessageInbound = async (c) => {
  const ok = validate(JSON.parse(c.text));
  return ok ? "valid" : validate.errors.map((e) => `${e.instancePath || "/"} ${e.keyword}`).sort().join("; ");
};

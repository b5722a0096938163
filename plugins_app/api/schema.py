"""OpenAPI additions generated from the hook table: one context schema per hook."""

from plugins_app.runtime.hooks import BOOLEAN, HOOKS, ID, ID_LIST, INTEGER, NUMBER, STRING, STRING_LIST

_TYPES = {
    ID: {"type": "string", "description": "a 64-bit id as a string", "example": "18446744073709551615"},
    STRING: {"type": "string"},
    NUMBER: {"type": "number"},
    INTEGER: {"type": "integer"},
    BOOLEAN: {"type": "boolean"},
    STRING_LIST: {"type": "array", "items": {"type": "string"}},
    ID_LIST: {"type": "array", "items": {"type": "string", "description": "a 64-bit id as a string"}},
}


def context_schema(spec) -> dict:
    properties = {}
    for f in spec.fields:
        prop = dict(_TYPES[f.type])
        if f.choices:
            prop["enum"] = list(f.choices)
        if f.nullable:
            prop["nullable"] = True
        properties[f.name] = prop
    return {"type": "object", "title": f"{spec.name} context", "description": spec.summary,
            "properties": properties, "required": [f.name for f in spec.fields if not f.optional],
            "additionalProperties": False}


def add_hook_contexts(result, generator, request, public):
    """drf-spectacular postprocessing hook."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    refs = []
    for spec in HOOKS.values():
        name = spec.name[0].upper() + spec.name[1:] + "Context"
        schemas[name] = context_schema(spec)
        refs.append({"$ref": f"#/components/schemas/{name}"})
    execute = result.get("paths", {}).get("/api/v1/hooks/{hook}/execute", {}).get("post")
    if execute:
        for param in execute.get("parameters", []):
            if param["name"] == "hook":
                param["schema"] = {"type": "string", "enum": list(HOOKS)}
        body = execute.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body and "$ref" in body:
            target = schemas[body["$ref"].rsplit("/", 1)[1]]
            target["properties"]["context"] = {"oneOf": refs, "description": "the hook's context (see the hook)"}
    return result

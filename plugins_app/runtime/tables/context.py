"""Context field types (check, schema, sample) and the check of a hook context against the hook table."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from plugins_app.runtime.tables.hooks import BOOLEAN, ID, ID_LIST, INTEGER, NUMBER, STRING, STRING_LIST, Field, HookSpec

# The platform's ids (sessions, agents, hosts...) as contexts and the API carry them: strings.
MAX_ID_LENGTH = 64


def is_platform_id(value: object) -> bool:
    """A non-empty string of at most MAX_ID_LENGTH characters: the one rule for the platform's ids."""
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH


class ContextError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _check_id(name: str, value: Any) -> None:
    if isinstance(value, bool) or isinstance(value, (int, float)):
        raise ContextError(name, "ids are strings (64-bit numbers do not survive JSON numbers)")
    if not is_platform_id(value):
        raise ContextError(name, f"expected a non-empty id string of at most {MAX_ID_LENGTH} characters")


def _check_string(name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise ContextError(name, "expected a string")


def _check_boolean(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ContextError(name, "expected true or false")


# The largest magnitude a number field may carry: what a JavaScript number holds exactly, so the
# platform (and a plugin) reads back what was sent; 1e308 is finite but no delay, count or duration.
LARGEST = 2 ** 53 - 1


def _check_integer(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ContextError(name, "expected an integer")
    if abs(value) > LARGEST:
        raise ContextError(name, f"expected an integer from -{LARGEST} to {LARGEST}")


def _check_number(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ContextError(name, "expected a finite number")
    if abs(value) > LARGEST:
        raise ContextError(name, f"expected a number from -{LARGEST} to {LARGEST}")


def _list_of(check_item: Callable[[str, Any], None]) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if not isinstance(value, list):
            raise ContextError(name, "expected an array of strings")
        for i, item in enumerate(value):
            check_item(f"{name}[{i}]", item)
    return check


@dataclass(frozen=True)
class FieldType:
    """Everything the hub does with one context field type, in one place."""
    check: Callable[[str, Any], None]   # raises ContextError naming the field
    schema: dict[str, Any]              # its OpenAPI/JSON schema
    sample: Any                         # a valid example value for forms and docs
    # The harness's reader for a handler's returned value (readField in harness.js); None: handlers
    # may not change a field of this type (ids name things; a hook making one mutable fails a test).
    harness: str | None


_ID_SCHEMA = {"type": "string", "description": "a 64-bit id as a string", "example": "18446744073709551615"}

FIELD_TYPES: dict[str, FieldType] = {
    ID: FieldType(_check_id, _ID_SCHEMA, "18446744073709551615", None),
    STRING: FieldType(_check_string, {"type": "string"}, "example", "string"),
    NUMBER: FieldType(_check_number, {"type": "number", "minimum": -LARGEST, "maximum": LARGEST}, 60, "number"),
    INTEGER: FieldType(_check_integer, {"type": "integer", "minimum": -LARGEST, "maximum": LARGEST}, 0, "integer"),
    BOOLEAN: FieldType(_check_boolean, {"type": "boolean"}, False, "boolean"),
    STRING_LIST: FieldType(_list_of(_check_string), {"type": "array", "items": {"type": "string"}},
                           ["example"], "string[]"),
    ID_LIST: FieldType(_list_of(_check_id), {"type": "array", "items": {k: v for k, v in _ID_SCHEMA.items()
                                                                      if k != "example"}}, [], None),
}


def _check_value(f: Field, name: str, value: Any) -> None:
    FIELD_TYPES[f.type].check(name, value)
    if f.choices and value not in f.choices:
        raise ContextError(name, "expected one of " + ", ".join(f.choices))


def validate_context(spec: HookSpec, context: Any) -> dict[str, Any]:
    """Return a clean copy of `context` holding exactly the hook's fields, or raise ContextError."""
    if not isinstance(context, dict):
        raise ContextError("context", "expected a JSON object")
    unknown = sorted(set(context) - set(spec.field_index))
    if unknown:
        raise ContextError(unknown[0], f"not a field of {spec.name}")
    clean: dict[str, Any] = {}
    for f in spec.fields:
        if f.name not in context:
            if f.optional:
                continue
            raise ContextError(f.name, f"missing ({f.describe()})")
        value = context[f.name]
        if value is None:
            if not f.nullable:
                raise ContextError(f.name, f"must not be null ({f.describe()})")
        else:
            _check_value(f, f.name, value)
        clean[f.name] = value
    return clean


def sample_context(spec: HookSpec) -> dict[str, Any]:
    """A filled-in example context, for forms and docs."""
    return {f.name: f.choices[0] if f.choices else FIELD_TYPES[f.type].sample for f in spec.fields}

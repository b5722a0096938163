"""Checks a hook context against the hook table and names the first field that is wrong."""

from __future__ import annotations

import math

from .hooks import BOOLEAN, ID, ID_LIST, INTEGER, NUMBER, STRING, STRING_LIST, Field, HookSpec

MAX_ID_LENGTH = 64


class ContextError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _check_id(name: str, value) -> None:
    if isinstance(value, bool) or isinstance(value, (int, float)):
        raise ContextError(name, "ids are strings (64-bit numbers do not survive JSON numbers)")
    if not isinstance(value, str) or not value or len(value) > MAX_ID_LENGTH:
        raise ContextError(name, f"expected a non-empty id string of at most {MAX_ID_LENGTH} characters")


def _check_value(f: Field, name: str, value) -> None:
    kind = f.type
    if kind == ID:
        _check_id(name, value)
    elif kind == STRING:
        if not isinstance(value, str):
            raise ContextError(name, "expected a string")
        if f.choices and value not in f.choices:
            raise ContextError(name, "expected one of " + ", ".join(f.choices))
    elif kind == BOOLEAN:
        if not isinstance(value, bool):
            raise ContextError(name, "expected true or false")
    elif kind == INTEGER:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ContextError(name, "expected an integer")
    elif kind == NUMBER:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ContextError(name, "expected a finite number")
    elif kind in (STRING_LIST, ID_LIST):
        if not isinstance(value, list):
            raise ContextError(name, "expected an array of strings")
        for i, item in enumerate(value):
            if kind == ID_LIST:
                _check_id(f"{name}[{i}]", item)
            elif not isinstance(item, str):
                raise ContextError(f"{name}[{i}]", "expected a string")
    else:  # pragma: no cover - the table only uses the types above
        raise AssertionError(kind)


def validate_context(spec: HookSpec, context) -> dict:
    """Return a clean copy of `context` holding exactly the hook's fields, or raise ContextError."""
    if not isinstance(context, dict):
        raise ContextError("context", "expected a JSON object")
    unknown = sorted(set(context) - set(spec.field_index))
    if unknown:
        raise ContextError(unknown[0], f"not a field of {spec.name}")
    clean = {}
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


def sample_context(spec: HookSpec) -> dict:
    """A filled-in example context, for forms and docs."""
    samples = {ID: "18446744073709551615", STRING: "example", NUMBER: 60, INTEGER: 0,
               BOOLEAN: False, STRING_LIST: ["example"], ID_LIST: []}
    out = {}
    for f in spec.fields:
        out[f.name] = f.choices[0] if f.choices else samples[f.type]
    return out

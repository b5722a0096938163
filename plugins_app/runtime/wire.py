"""JSON on the parent<->engine wire: orjson where it can, the standard library where it can't."""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj)
    except TypeError:   # ints beyond 64 bits, lone surrogates: rare, and json handles both
        return json.dumps(obj).encode()


def loads(data: bytes | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:   # lone surrogates that JSON.stringify escaped
        return _repaired(json.loads(data))


def _repaired(value: Any) -> Any:
    """`value` with every lone surrogate replaced by U+FFFD: text leaving V8 is always valid Unicode."""
    if isinstance(value, str):
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in value) if _has_surrogate(value) else value
    if isinstance(value, list):
        return [_repaired(v) for v in value]
    if isinstance(value, dict):
        return {_repaired(k): _repaired(v) for k, v in value.items()}
    return value


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


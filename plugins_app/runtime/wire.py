"""JSON on the parent<->engine wire: orjson where it can, the standard library where it can't."""

from __future__ import annotations

import json

import orjson


def dumps(obj) -> bytes:
    try:
        return orjson.dumps(obj)
    except TypeError:   # ints beyond 64 bits, lone surrogates: rare, and json handles both
        return json.dumps(obj).encode()


def loads(data: bytes | str):
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:   # lone surrogates that JSON.stringify escaped
        return json.loads(data)


def js_string(obj) -> str:
    """`obj` as JSON, quoted as a JavaScript string literal (for embedding in evaluated code)."""
    return json.dumps(dumps(obj).decode())

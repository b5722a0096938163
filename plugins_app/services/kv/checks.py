"""What host.kv accepts: keys, values, expiry and counter steps, each refused with the reason."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_KEY_BYTES = 512
MAX_VALUE_BYTES = 64 * 1024
MAX_TTL_SECONDS = 10 * 366 * 24 * 3600   # ten years: longer is "forever", which is no ttl
MAX_LIST_LIMIT = 1000
DEFAULT_LIST_LIMIT = 100
# JavaScript numbers are exact integers up to 2^53 - 1: a counter past it could not be read back as it is.
MAX_SAFE_INTEGER = 2**53 - 1
COUNTER_BYTES = 8   # what a counter's value counts for in the byte quota


class KvError(ValueError):
    """Bad input or a refused write; the message names what is wrong (a plugin sees it as the rejection)."""


@dataclass(frozen=True)
class Encoded:
    """A value as stored: a safe integer goes to the counter column, anything else as JSON text."""

    text: str | None
    number: int | None
    size: int   # bytes of the value as the quota counts them


def key(raw: Any) -> str:
    if not isinstance(raw, str):
        raise KvError(f"the key must be a string, not {_kind(raw)}")
    size = len(raw.encode("utf-8", "surrogatepass"))
    if not 0 < size <= MAX_KEY_BYTES:
        raise KvError(f"the key must be 1 to {MAX_KEY_BYTES} bytes of UTF-8 (this one is {size})")
    if "\x00" in raw:
        raise KvError("the key must not contain a NUL character")   # PostgreSQL's text cannot hold one
    return raw


def value(raw: Any) -> Encoded:
    if is_integer(raw):
        return Encoded(None, raw, COUNTER_BYTES)
    try:
        text = json.dumps(raw, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        raise KvError("the value must be JSON (null, a boolean, a number, a string, an array or an object)") from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_VALUE_BYTES:
        raise KvError(f"the value is {size} bytes as JSON, over the limit of {MAX_VALUE_BYTES}")
    if "\\u0000" in text or "\x00" in text:
        raise KvError("the value must not contain a NUL character")
    return Encoded(text, None, size)


def decoded(text: str | None, number: int | None) -> Any:
    return number if number is not None else json.loads(text) if text is not None else None


def options(raw: Any, allowed: tuple[str, ...]) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise KvError(f"the options must be an object, not {_kind(raw)}")
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise KvError(f"unknown option {unknown[0]!r}; allowed: {', '.join(allowed)}")
    return raw


def ttl(raw: Any) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 < raw <= MAX_TTL_SECONDS:
        raise KvError(f"ttlSeconds must be a number of seconds above 0 and at most {MAX_TTL_SECONDS}")
    return float(raw)


def step(raw: Any, name: str) -> int:
    if not is_integer(raw):
        raise KvError(f"{name} must be an integer from {-MAX_SAFE_INTEGER} to {MAX_SAFE_INTEGER}, not {raw!r}"[:200])
    return raw


def limit(raw: Any) -> int:
    if raw is None:
        return DEFAULT_LIST_LIMIT
    if not is_integer(raw) or not 1 <= raw <= MAX_LIST_LIMIT:
        raise KvError(f"limit must be an integer from 1 to {MAX_LIST_LIMIT}")
    return raw


def optional_string(raw: Any, name: str) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str) or len(raw.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES or "\x00" in raw:
        raise KvError(f"{name} must be a string of at most {MAX_KEY_BYTES} bytes")
    return raw


def is_integer(raw: Any) -> bool:
    return isinstance(raw, int) and not isinstance(raw, bool) and -MAX_SAFE_INTEGER <= raw <= MAX_SAFE_INTEGER


def _kind(raw: Any) -> str:
    return "null" if raw is None else {bool: "a boolean", int: "a number", float: "a number", str: "a string",
                                       list: "an array", dict: "an object"}.get(type(raw), type(raw).__name__)

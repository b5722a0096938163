"""Rules for data entering the hub: nesting is bounded, and text is valid Unicode without NUL."""

import re
from itertools import accumulate

from plugins_app.errors import InvalidInput

MAX_DEPTH = 64

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1
# Only a \u escape can put a NUL or a lone surrogate into parsed JSON: raw ones are refused by the parser.
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


def too_deep(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON text nests arrays and objects deeper than `limit`, found without parsing it."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def may_hold_bad_text(raw: bytes) -> bool:
    return _SUSPECT_ESCAPE.search(raw) is not None


def text_problem(text: str) -> str | None:
    """Why `text` may not enter the hub, or None."""
    if "\x00" in text:
        return "contains a NUL character"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "contains a lone surrogate (not valid Unicode text)"
    return None


def check_text(value, root: str = "") -> None:
    """Raise InvalidInput naming the first string (value or key) under `value` that breaks the text rule."""
    stack = [(root, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                raise InvalidInput(path or "body", problem)
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                key_path = _join(path, key)
                problem = text_problem(key)
                if problem:
                    raise InvalidInput(key_path, "this key " + problem)
                stack.append((key_path, child))
        elif isinstance(item, list):
            stack.extend((f"{path or 'body'}[{i}]", child) for i, child in reversed(list(enumerate(item))))


def _join(path: str, key: str) -> str:
    key = key.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\u0000")
    return f"{path}.{key}" if path else key

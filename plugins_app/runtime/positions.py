"""Leads a failing handler back to its author's line and column, through the source map the compiler
appends to a plugin's code (TypeScript's, or a bundle's own) and the hook positions it carries."""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from plugins_app.runtime.protocol import FAILED_STATUSES, JsonObject

# The compiler's last line (engine/compiler.py's SOURCE_MAP_PREFIX), or a bundle's own inline map.
_INLINE_MAP = re.compile(r"//# sourceMappingURL=data:application/json(?:;charset=[\w-]+)?;base64,([A-Za-z0-9+/=]+)\s*$")
_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
MAP_TAIL_CHARS = 4 * 1024 * 1024   # where the map comment is looked for: the end of the code
# A stack frame of a plugin's own code, as SES's compartment evaluates it (harness.js reads it the same way).
PLUGIN_FRAME = re.compile(r"eval at <anonymous> \(eval at [^\n]*, <anonymous>:(\d+):(\d+)\)?$", re.MULTILINE)
# A warning's position, as written by `described` (the warnings API reads it back into `at`).
WARNING_AT = re.compile(r" \((?:at|handler at) line (\d+), column (\d+)(?: of ([^)]+))?\)$")


@dataclass(frozen=True)
class SourceMap:
    lines: tuple[tuple[tuple[int, int, int, int], ...], ...]   # per generated line: (column, source, line, column)
    sources: tuple[str, ...]
    hooks: dict[str, tuple[int, int]]   # hook -> (line, column) in the author's source, 1-based

    def original(self, line: int, column: int) -> JsonObject | None:
        """The author's {line, column} (1-based, and "source" for a bundle of several files) for a
        1-based position in the compiled code; None when the map says nothing of that line."""
        if not 0 < line <= len(self.lines) or not self.lines[line - 1]:
            return None
        segments = self.lines[line - 1]
        at = max(bisect.bisect_right([s[0] for s in segments], column - 1) - 1, 0)
        _, source, src_line, src_column = segments[at]
        found: JsonObject = {"line": src_line + 1, "column": src_column + 1}
        if len(self.sources) > 1:
            found["source"] = self.sources[source]
        return found


def decode_vlq(text: str) -> list[int]:
    """One source-map segment's base64 VLQ fields."""
    values, shift, value = [], 0, 0
    for char in text:
        digit = _B64[char]
        value += (digit & 31) << shift
        if digit & 32:
            shift += 5
            continue
        values.append(-(value >> 1) if value & 1 else value >> 1)
        shift, value = 0, 0
    return values


def parse(raw: JsonObject) -> SourceMap:
    lines: list[tuple[tuple[int, int, int, int], ...]] = []
    source = src_line = src_column = 0
    mappings = str(raw.get("mappings") or "")
    for text in mappings.split(";") if mappings else ():   # none: JavaScript, the code is the source
        column, segments = 0, []
        for part in filter(None, text.split(",")):
            fields = decode_vlq(part)
            column += fields[0]
            if len(fields) >= 4:
                source, src_line, src_column = source + fields[1], src_line + fields[2], src_column + fields[3]
                segments.append((column, source, src_line, src_column))
        lines.append(tuple(segments))
    hooks = {name: (int(p["line"]), int(p["column"])) for name, p in (raw.get("x_hub_hooks") or {}).items()}
    return SourceMap(tuple(lines), tuple(str(s) for s in raw.get("sources") or ()), hooks)


def _read_map(code: str) -> SourceMap | None:
    found = _INLINE_MAP.search(code[-MAP_TAIL_CHARS:])
    if found is None:
        return None
    try:
        raw = json.loads(base64.b64decode(found.group(1)))
        return parse(raw) if isinstance(raw, dict) else None
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None   # a bundle's own map we cannot read: positions stay in the compiled code


_maps: OrderedDict[str, SourceMap | None] = OrderedDict()   # code hash -> its map (the code itself is large)
_maps_lock = threading.Lock()
MAPS_KEPT = 256


def source_map(code_hash: str, code: str) -> SourceMap | None:
    with _maps_lock:
        if code_hash in _maps:
            _maps.move_to_end(code_hash)
            return _maps[code_hash]
    found = _read_map(code)
    with _maps_lock:
        _maps[code_hash] = found
        while len(_maps) > MAPS_KEPT:
            _maps.popitem(last=False)
    return found


def locate(code_hash: str, code: str, hook: str, status: str, thrown_at: JsonObject | None) -> JsonObject | None:
    """Where the author should look: a thrown error's own position, mapped to the source; otherwise
    (a timeout, a malformed result, an error thrown outside the plugin's code) where the hook's
    handler is assigned. None when neither is known (code compiled before source maps were kept)."""
    mapped = source_map(code_hash, code)
    if thrown_at and isinstance(thrown_at.get("line"), int) and isinstance(thrown_at.get("column"), int):
        if mapped is not None and not mapped.lines:   # JavaScript: the code is the source
            return {"line": thrown_at["line"], "column": thrown_at["column"]}
        found = mapped.original(thrown_at["line"], thrown_at["column"]) if mapped is not None else None
        if found is not None:
            return found
    if mapped is not None and hook in mapped.hooks and status in FAILED_STATUSES:
        line, column = mapped.hooks[hook]
        return {"line": line, "column": column, "handler": True}
    return None


def described(warning: str | None, at: JsonObject | None) -> str | None:
    """The trace's warning with the position at its end: "(at line 3, column 12)" for where it threw,
    "(handler at line 2, column 40)" for the handler that timed out or answered wrongly."""
    if warning is None or at is None:
        return warning
    where = f"line {at['line']}, column {at['column']}" + (f" of {at['source']}" if at.get("source") else "")
    return f"{warning} ({'handler at' if at.get('handler') else 'at'} {where})"


def read_back(warning: str | None) -> JsonObject | None:
    """The position `described` wrote at the end of a warning (a stored warning keeps only its text)."""
    found = WARNING_AT.search(warning or "")
    if found is None:
        return None
    at: JsonObject = {"line": int(found.group(1)), "column": int(found.group(2))}
    if found.group(3):
        at["source"] = found.group(3)
    if "(handler at" in found.group(0):
        at["handler"] = True
    return at

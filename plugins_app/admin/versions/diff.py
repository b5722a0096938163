"""An inline word diff of two hook values, as HTML with <del> and <ins>."""

from __future__ import annotations

import json
import re
from difflib import SequenceMatcher

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

TOKEN = re.compile(r"\s+|\w+|[^\w\s]")
# Word-level matching is quadratic at worst; long values are compared line by line.
MAX_TOKENS = 4000


def as_text(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def diff_html(before, after) -> SafeString:
    old, new = as_text(before), as_text(after)
    a, b = TOKEN.findall(old), TOKEN.findall(new)
    if max(len(a), len(b)) > MAX_TOKENS:
        a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    parts = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            parts.append(escape("".join(a[i1:i2])))
            continue
        if i2 > i1:
            parts.append(format_html("<del>{}</del>", "".join(a[i1:i2])))
        if j2 > j1:
            parts.append(format_html("<ins>{}</ins>", "".join(b[j1:j2])))
    return mark_safe("".join(parts))

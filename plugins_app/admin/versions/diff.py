"""Diffs as HTML, in bounded work (services/versions/line_diff.py): an inline word diff of two hook values
with <del> and <ins>, and the versions page's side-by-side line diff of two sources."""

from __future__ import annotations

import json
import re

from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from plugins_app.services.versions import line_diff

TOKEN = re.compile(r"\s+|\w+|[^\w\s]")
# Word-level matching costs more per item; long values are compared line by line.
MAX_TOKENS = 4000
CONTEXT_LINES = 3   # unchanged lines shown around each change of the side-by-side diff


def as_text(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def diff_html(before, after) -> SafeString:
    old, new = as_text(before), as_text(after)
    a, b = TOKEN.findall(old), TOKEN.findall(new)
    if max(len(a), len(b)) > MAX_TOKENS:
        a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    if line_diff.too_large(a, b):
        codes: list[line_diff.Opcode] = [("replace", 0, len(a), 0, len(b))] if old != new else [
            ("equal", 0, len(a), 0, len(b))]
    else:
        codes = line_diff.diff(a, b).opcodes
    parts = []
    for op, i1, i2, j1, j2 in codes:
        if op == "equal":
            parts.append(escape("".join(a[i1:i2])))
            continue
        if i2 > i1:
            parts.append(format_html("<del>{}</del>", "".join(a[i1:i2])))
        if j2 > j1:
            parts.append(format_html("<ins>{}</ins>", "".join(b[j1:j2])))
    return mark_safe("".join(parts))


def _hunks(codes: list[line_diff.Opcode], context: int) -> list[list[line_diff.Opcode]]:
    """The opcodes grouped into hunks with `context` unchanged lines around each change (as difflib's
    get_grouped_opcodes)."""
    codes = list(codes)
    if not codes:
        return []
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)
    hunks, group = [], []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            hunks.append(group)
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    hunks.append(group)
    return [h for h in hunks if any(code[0] != "equal" for code in h)]


def _row(css: tuple[str, str], number_a, line_a, number_b, line_b) -> tuple:
    return (css[0], number_a, line_a, css[1], number_b, line_b)


def side_by_side(old: str, new: str, old_label: str, new_label: str) -> SafeString | None:
    """A table of the changed lines of `old` and `new` side by side (each escaped), with their context;
    None when either has more than line_diff.MAX_LINES lines (the page says so instead)."""
    a, b = old.splitlines(), new.splitlines()
    if line_diff.too_large(a, b):
        return None
    result = line_diff.diff(a, b)
    rows = []
    for number, hunk in enumerate(_hunks(result.opcodes, CONTEXT_LINES)):
        if number:
            rows.append(("diff_header", "…", "", "diff_header", "…", ""))
        for tag, i1, i2, j1, j2 in hunk:
            if tag == "equal":
                rows += [_row(("", ""), i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]) for k in range(i2 - i1)]
                continue
            css = {"replace": ("diff_chg", "diff_chg"), "delete": ("diff_sub", ""), "insert": ("", "diff_add")}[tag]
            for k in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + k, j1 + k
                rows.append(_row(css, i + 1 if i < i2 else "", a[i] if i < i2 else "",
                                 j + 1 if j < j2 else "", b[j] if j < j2 else ""))
    body = format_html_join("\n", '<tr><td class="diff_header">{1}</td><td class="{0}">{2}</td>'
                                  '<td class="diff_header">{4}</td><td class="{3}">{5}</td></tr>', rows)
    note = "" if result.smallest else format_html(
        '<p class="hub-diff-whole">These versions differ in too many places to find the smallest diff here: '
        "the changed region is shown whole.</p>")
    return format_html('{}<table class="diff" id="hub-line-diff"><thead><tr><th colspan="2">{}</th>'
                       '<th colspan="2">{}</th></tr></thead><tbody>{}</tbody></table>', note, old_label,
                       new_label, body)

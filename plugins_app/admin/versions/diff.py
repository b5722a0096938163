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


def _marked(line: str, css: str) -> SafeString:
    return format_html('<span class="{}">{}</span>', css, line) if line else mark_safe("")


def _changed_pair(old: str, new: str) -> tuple[SafeString, SafeString]:
    """Two lines with what differs between their common start and end marked (linear in their length)."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    cells = []
    for line in (old, new):
        middle = line[head:len(line) - tail]
        cells.append(format_html("{}{}{}", line[:head], _marked(middle, "diff_chg"), line[len(line) - tail:]))
    return cells[0], cells[1]


def side_by_side(old: str, new: str, old_label: str, new_label: str) -> SafeString | None:
    """A table of the changed lines of `old` and `new` side by side (each escaped, as difflib.HtmlDiff
    marked them: diff_chg within a changed line, diff_sub and diff_add for lines only one side has), with
    their context; None when either has more than line_diff.MAX_LINES lines (the page says so instead)."""
    a, b = old.splitlines(), new.splitlines()
    if line_diff.too_large(a, b):
        return None
    result = line_diff.diff(a, b)
    rows: list[tuple] = []
    for number, hunk in enumerate(_hunks(result.opcodes, CONTEXT_LINES)):
        if number:
            rows.append(("…", "", "…", ""))
        for tag, i1, i2, j1, j2 in hunk:
            if tag == "equal":
                rows += [(i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]) for k in range(i2 - i1)]
                continue
            for k in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + k, j1 + k
                if i < i2 and j < j2:
                    left, right = _changed_pair(a[i], b[j])
                    rows.append((i + 1, left, j + 1, right))
                elif i < i2:
                    rows.append((i + 1, _marked(a[i], "diff_sub"), "", ""))
                else:
                    rows.append(("", "", j + 1, _marked(b[j], "diff_add")))
    body = format_html_join("\n", '<tr><td class="diff_header">{}</td><td>{}</td><td class="diff_header">{}</td>'
                                  "<td>{}</td></tr>", rows)
    note = "" if result.smallest else format_html(
        '<p class="hub-diff-whole">These versions differ in too many places to find the smallest diff here: '
        "the changed region is shown whole.</p>")
    # The columns are declared so a fixed layout gives the code, not the line numbers, the width.
    columns = mark_safe('<colgroup><col class="hub-diff-number"><col class="hub-diff-code">'
                        '<col class="hub-diff-number"><col class="hub-diff-code"></colgroup>')
    return format_html('{}<table class="diff" id="hub-line-diff">{}<thead><tr><th colspan="2">{}</th>'
                       '<th colspan="2">{}</th></tr></thead><tbody>{}</tbody></table>', note, columns, old_label,
                       new_label, body)

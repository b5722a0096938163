"""A diff of two sequences (a version's lines, a value's words) in bounded work: never quadratic in a web worker."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

# Past this many lines on either side a page says "too large to show here" instead of diffing.
MAX_LINES = 4000
# Steps of the search for the smallest diff (about 0.5 s of Python); past them the changed region
# between the common head and tail is shown whole, as one replacement: still a correct diff, just not the smallest.
MAX_STEPS = 400_000

Opcode = tuple[str, int, int, int, int]   # as difflib.SequenceMatcher.get_opcodes(): tag, i1, i2, j1, j2


@dataclass(frozen=True)
class Diff:
    opcodes: list[Opcode]
    steps: int          # the work done, counted (the tests bound it)
    smallest: bool      # False when MAX_STEPS ran out and the changed region is shown whole


def too_large(a: Sequence, b: Sequence, max_lines: int = MAX_LINES) -> bool:
    return max(len(a), len(b)) > max_lines


def diff(a: Sequence[Hashable], b: Sequence[Hashable], max_steps: int = MAX_STEPS) -> Diff:
    """Opcodes turning `a` into `b`: the common head and tail, then Myers' O(ND) search on what lies between,
    leaving out items the other side never has (they can only be deleted or inserted), within `max_steps`."""
    ids: dict[Hashable, int] = {}
    ia = [ids.setdefault(x, len(ids)) for x in a]
    ib = [ids.setdefault(x, len(ids)) for x in b]
    n, m = len(ia), len(ib)
    head = 0
    while head < n and head < m and ia[head] == ib[head]:
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and ia[n - 1 - tail] == ib[m - 1 - tail]:
        tail += 1
    steps = n + m
    in_b, in_a = set(ib[head:m - tail]), set(ia[head:n - tail])
    keep_a = [i for i in range(head, n - tail) if ia[i] in in_b]
    keep_b = [j for j in range(head, m - tail) if ib[j] in in_a]
    matched, searched = _myers([ia[i] for i in keep_a], [ib[j] for j in keep_b], max_steps - steps)
    pairs = [(keep_a[x], keep_b[y]) for x, y in matched] if matched is not None else []
    steps += searched
    pairs = [(i, i) for i in range(head)] + pairs + [(n - tail + t, m - tail + t) for t in range(tail)]
    return Diff(_opcodes(pairs, n, m), steps, matched is not None)


def _myers(a: list[int], b: list[int], budget: int) -> tuple[list[tuple[int, int]] | None, int]:
    """The matched index pairs of a shortest edit script (None past `budget` steps) and the steps taken."""
    n, m = len(a), len(b)
    if not n or not m:
        return [], 0
    off = n + m + 1
    v = [0] * (2 * off + 2)
    trace: list[list[int]] = []
    steps = 0
    for d in range(n + m + 1):
        trace.append(v[off - d - 1: off + d + 2])   # v before round d, for k in -d-1 .. d+1
        steps += 2 * d + 3
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[off + k - 1] < v[off + k + 1]):
                x = v[off + k + 1]
            else:
                x = v[off + k - 1] + 1
            y = x - k
            start = x
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            v[off + k] = x
            steps += 1 + x - start
            if x >= n and y >= m:
                return _back(trace, n, m), steps
        if steps > budget:
            return None, steps
    return None, steps   # not reached: n + m rounds always reach the end


def _back(trace: list[list[int]], n: int, m: int) -> list[tuple[int, int]]:
    x, y = n, m
    pairs: list[tuple[int, int]] = []
    for d in range(len(trace) - 1, -1, -1):
        row = trace[d]

        def at(k: int, row=row, d=d) -> int:
            return row[k + d + 1]
        k = x - y
        prev_k = k + 1 if k == -d or (k != d and at(k - 1) < at(k + 1)) else k - 1
        prev_x = at(prev_k)
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x, y = x - 1, y - 1
            pairs.append((x, y))
        if d:
            x, y = prev_x, prev_y
    pairs.reverse()
    return pairs


def _opcodes(pairs: list[tuple[int, int]], n: int, m: int) -> list[Opcode]:
    codes: list[Opcode] = []
    i = j = 0
    for pi, pj in [*pairs, (n, m)]:
        if pi > i or pj > j:
            tag = "replace" if pi > i and pj > j else "delete" if pi > i else "insert"
            codes.append((tag, i, pi, j, pj))
        if pi < n or pj < m:   # the sentinel (n, m) matches nothing
            if codes and codes[-1][0] == "equal" and codes[-1][2] == pi and codes[-1][4] == pj:
                tag, i1, _, j1, _ = codes[-1]
                codes[-1] = ("equal", i1, pi + 1, j1, pj + 1)
            else:
                codes.append(("equal", pi, pi + 1, pj, pj + 1))
        i, j = pi + 1, pj + 1
    return codes

"""bench/io.py's figures: each phase summed up, set beside its ideal and the quiet tenants' run alone,
and checked against issue 38's targets. Pure functions of the calls, so tests/bench can check them."""

from __future__ import annotations

from dataclasses import dataclass, field

GIB_KIB = 1024 * 1024
NAN = float("nan")
INF = float("inf")


@dataclass
class Call:
    """One call as a client process saw it: seconds since the phase started, and what came back
    ("ok", an HTTP status such as "503", "timeout", "unanswered", "handler error", ...)."""
    start: float
    done: float
    status: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def ms(self) -> float:
        return (self.done - self.start) * 1000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else NAN


def rate_in(calls: list[Call], begin: float, end: float) -> float:
    """Answered calls per second over [begin, end], each call counted for the part of its time that
    falls in the window. A closed loop with a 2 s host call completes its calls in waves every 2 s
    at first; counting whole completions would make the figure depend on where a window's edges
    fall between waves, and this does not (a caller busy throughout counts window / latency)."""
    if end <= begin:
        return NAN
    total = 0.0
    for c in calls:
        if not c.ok:
            continue
        span = c.done - c.start
        if span <= 0:
            total += 1.0 if begin <= c.done <= end else 0.0
            continue
        overlap = min(c.done, end) - max(c.start, begin)
        if overlap > 0:
            total += overlap / span
    return total / (end - begin)


@dataclass
class Figures:
    """One group of callers (the I/O tenant's, or the quiet tenants') over one phase."""
    name: str
    callers: int
    delay_s: float
    seconds: float             # the phase's length (calls started until then; answers awaited after)
    started: int = 0
    answered: int = 0          # calls that got an HTTP answer of any kind
    ok: int = 0
    rate: float = NAN          # ok calls/s in the measured window (after the ramp)
    p50: float = NAN           # ms, over every ok call of the phase
    p99: float = NAN
    max: float = NAN
    # The same over every call, one with no good answer (an error, a timeout) counted as never answered
    # (inf): for a quiet tenant a 503 or a timeout is the worst latency, not one left out.
    p99_all: float = NAN
    max_all: float = NAN
    errors: dict = field(default_factory=dict)   # status -> count: non-200, timeouts, unanswered, bad answers
    rss_peak_kib: int = 0      # the hub's whole process tree, summed VmRSS, at its highest in the phase
    rss_parts: dict = field(default_factory=dict)

    @property
    def error_n(self) -> int:
        return sum(self.errors.values())


def summarize(name: str, calls: list[Call], callers: int, delay_s: float, seconds: float,
              ramp: float = 1.0) -> Figures:
    fig = Figures(name, callers, delay_s, seconds, started=len(calls))
    good = [c for c in calls if c.ok]
    fig.ok = len(good)
    fig.answered = sum(1 for c in calls if c.status not in ("timeout", "unanswered") and not c.status.startswith("conn"))
    fig.rate = rate_in(calls, min(ramp, seconds / 4), seconds)
    ms = [c.ms for c in good]
    fig.p50, fig.p99, fig.max = pct(ms, 0.5), pct(ms, 0.99), max(ms, default=NAN)
    every = [c.ms if c.ok else INF for c in calls]
    fig.p99_all, fig.max_all = pct(every, 0.99), max(every, default=NAN)
    for c in calls:
        if not c.ok:
            fig.errors[c.status] = fig.errors.get(c.status, 0) + 1
    return fig


def pooled(name: str, runs: list[tuple[Figures, list[Call]]]) -> Figures:
    """Several runs of one group taken as one reference (the quiet tenants alone before and after the
    loads: this host's speed drifts over minutes): the mean of their rates, percentiles over all
    their calls."""
    calls = [c for _, cs in runs for c in cs]
    first = runs[0][0]
    fig = summarize(name, calls, first.callers, first.delay_s, sum(f.seconds for f, _ in runs))
    fig.rate = sum(f.rate for f, _ in runs) / len(runs)
    return fig


def ideal_rate(callers: int, delay_s: float, cpu_rate: float) -> float:
    """What the hub could do at best: every caller's call back as soon as its host call answers
    (callers / delay), unless the machine cannot run the chains that fast even with no wait."""
    if delay_s <= 0:
        return cpu_rate
    return min(callers / delay_s, cpu_rate) if cpu_rate == cpu_rate else callers / delay_s


# ---------------------------------------------------------------- targets (issue 38's "Done when")

@dataclass(frozen=True)
class Target:
    least_of_ideal: float | None = None   # calls/s at least this share of the ideal
    no_errors: bool = False
    all_answered: bool = False
    most_rss_kib: int | None = None
    quiet: bool = False                   # the quiet tenants' targets apply beside this load


QUIET_MOST_P99X = 3.0      # quiet p99 at most 3x their p99 alone
QUIET_MOST_MAX_MS = 250.0  # quiet slowest call at most 250 ms
QUIET_LEAST_RATE = 0.80    # quiet throughput at least 80 % of alone

TARGETS = {
    "a": Target(least_of_ideal=0.75, quiet=True),
    "b": Target(least_of_ideal=0.75, no_errors=True, quiet=True),
    "c": Target(no_errors=True, all_answered=True, most_rss_kib=int(1.5 * GIB_KIB), quiet=True),
}


def checks(load: Figures, ideal: float, target: Target | None, quiet: Figures | None = None,
           quiet_alone: Figures | None = None) -> list[tuple[str, bool]]:
    """(what, met) for each of the load's targets; empty when the load has none."""
    if target is None:
        return []
    out: list[tuple[str, bool]] = []
    if target.least_of_ideal is not None:
        out.append((f"calls/s >= {target.least_of_ideal:.2f}x ideal", _ratio(load.rate, ideal) >= target.least_of_ideal))
    if target.all_answered:
        out.append(("all answered", load.started > 0 and load.answered == load.started))
    if target.no_errors:
        out.append(("0 errors", load.started > 0 and load.error_n == 0))
    if target.most_rss_kib is not None:
        out.append((f"RSS <= {target.most_rss_kib / GIB_KIB:g} GiB", 0 < load.rss_peak_kib <= target.most_rss_kib))
    if target.quiet and quiet is not None and quiet_alone is not None:
        # Over every quiet call: one that got no good answer counts as never answered.
        out.append((f"quiet p99 <= {QUIET_MOST_P99X:g}x", _ratio(quiet.p99_all, quiet_alone.p99) <= QUIET_MOST_P99X))
        out.append((f"quiet max <= {QUIET_MOST_MAX_MS:g} ms", quiet.max_all <= QUIET_MOST_MAX_MS))
        out.append((f"quiet calls/s >= {QUIET_LEAST_RATE:.2f}x", _ratio(quiet.rate, quiet_alone.rate) >= QUIET_LEAST_RATE))
    return out


def verdict(results: list[tuple[str, bool]]) -> str:
    if not results:
        return "-"
    missed = [what for what, met in results if not met]
    return "pass" if not missed else "FAIL: " + "; ".join(missed)


def _ratio(a: float, b: float) -> float:
    """a / b; NaN when either is missing (NaN compares false, so a missing figure never passes)."""
    if b == 0 or a != a or b != b:
        return NAN
    return a / b


# ---------------------------------------------------------------- the table

HEAD = ("phase", "callers", "host call", "calls/s", "ideal", "x ideal", "p50 ms", "p99 ms", "errors",
        "quiet calls/s", "quiet p99 ms", "quiet max ms", "hub RSS peak", "targets")
# The load's p50 / p99 are over its answered calls (its errors have their own column); the quiet
# tenants' p99 and max are over all their calls, one with no good answer shown as "none".


def _x(ratio: float) -> str:
    return "-" if ratio != ratio else f"{ratio:.2f}x"


def num(v: float, digits: int = 1) -> str:
    if v == INF:
        return "none"   # a call that got no good answer
    return "-" if v != v else f"{v:,.{digits}f}"


def _errors(fig: Figures) -> str:
    if not fig.errors:
        return "0"
    return f"{fig.error_n} (" + ", ".join(f"{k} {v}" for k, v in sorted(fig.errors.items())) + ")"


def row(load: Figures, ideal: float, target: Target | None, quiet: Figures | None,
        quiet_alone: Figures | None) -> tuple[str, ...]:
    """One line of the table: the load's figures against its ideal, the quiet tenants' against their
    run alone (figure and ratio), and the verdict on the targets."""
    def quiet_cell(value: float, alone: float, digits: int = 1) -> str:
        if quiet is None:
            return "-"
        if value == INF or quiet_alone is None:
            return num(value, digits)
        return f"{num(value, digits)} ({_x(_ratio(value, alone))})"

    q = quiet or Figures("", 0, 0, 0)
    qa = quiet_alone or Figures("", 0, 0, 0)
    rss = f"{load.rss_peak_kib / 1024:,.0f} MiB" if load.rss_peak_kib else "-"
    return (load.name, str(load.callers), f"{load.delay_s * 1000:,.0f} ms", num(load.rate), num(ideal),
            _x(_ratio(load.rate, ideal)), num(load.p50), num(load.p99), _errors(load),
            quiet_cell(q.rate, qa.rate), quiet_cell(q.p99_all, qa.p99, 2),
            "-" if quiet is None else _quiet_max(q), rss, verdict(checks(load, ideal, target, quiet, quiet_alone)))


def _quiet_max(q: Figures) -> str:
    failed = q.error_n
    return num(q.max_all) + (f" ({failed} failed)" if failed else "")


def quiet_alone_row(alone: Figures) -> tuple[str, ...]:
    return (alone.name, str(alone.callers), "no I/O", num(alone.rate), "", "", num(alone.p50, 2), num(alone.p99, 2),
            _errors(alone), num(alone.rate), num(alone.p99, 2), num(alone.max), "", "(the quiet tenants' reference)")


def table(rows: list[tuple[str, ...]]) -> str:
    everything = [HEAD, *rows]
    widths = [max(len(r[i]) for r in everything) for i in range(len(HEAD))]
    left = {0, len(HEAD) - 1}
    return "\n".join("  ".join(cell.ljust(w) if i in left else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(r, widths, strict=True))).rstrip()
                     for r in everything)


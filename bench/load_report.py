"""bench/load.py's figures: each phase summed up, compared with its baselines, and printed against the targets."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field

GIB_KIB = 1024 * 1024
PHASES = ("baseline", "heavy", "runaway2", "runaway4", "many", "busy")
# Issue 11's targets: the good accounts' least throughput in each phase (a ratio to their
# baseline), and the most their p99 may grow beside a runaway.
LEAST_RATIO = {"heavy": 0.6, "runaway2": 0.7, "runaway4": 0.7, "many": 0.4}
MOST_P99X = 3.0
GOOD_ROLES = ("good", "many")
TITLES = {"baseline": "1 baseline: 8 good", "heavy": "2 + CPU-heavy x1", "runaway2": "3 + runaway x2",
          "runaway4": "4 + runaway x4", "many": "5 many accounts", "busy": "6 one account x8"}


# ---------------------------------------------------------------- calls

@dataclass
class Call:
    role: str          # good, heavy, runaway, many
    thread: int
    first: bool        # the account's (many) or the thread's (others) first call in this phase
    done: float        # seconds since the phase started
    ms: float
    status: object
    chain_ms: float = float("nan")   # Server-Timing: time inside the execute view

    @property
    def ok(self) -> bool:
        return isinstance(self.status, int) and 200 <= self.status < 300

    @property
    def good(self) -> bool:
        """A good account's answered call (the figures' subject), not a bad tenant's."""
        return self.role in GOOD_ROLES and self.ok


# ---------------------------------------------------------------- figures

TIMELINE_BUCKETS = int(os.environ.get("BENCH_TIMELINE_BUCKETS", "10"))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass
class Figures:
    phase: str
    good_n: int = 0
    rate: float = 0.0
    p50: float = float("nan")
    p99: float = float("nan")
    chain_p50: float = float("nan")            # good calls' time inside the execute view (Server-Timing)
    slowest: float = float("nan")              # the slowest good call: one stuck behind a bad tenant shows here
    bad: dict = field(default_factory=dict)   # role -> dict(n, first_ms, later_p50)
    first_call_p50: float = float("nan")      # many: median of each account's first call
    first_chain_p50: float = float("nan")     # ... of which inside the execute view (Server-Timing)
    warm_p50: float = float("nan")            # many: the same accounts' later calls
    reached: int = 0
    failures: dict = field(default_factory=dict)   # status -> count (non-2xx, errors, timeouts)
    mem: dict = field(default_factory=dict)
    timeline: list = field(default_factory=list)   # good req/s in each tenth of the phase
    base: Figures | None = None   # what its ratios are to: the baselines just before and after it
    alternation: Alternation | None = None   # the same tenant again, calling in alternate blocks


# ---------------------------------------------------------------- alternation

ALTERNATED = ("heavy", "runaway2", "runaway4")   # the bad-tenant phases
SETTLE_S = 1.0   # the start of each block is left out: a bad call in flight at a switch finishes there


def alternation_on(block_s: float):
    """Whether the bad tenant calls at t seconds: blocks go on, off, off, on, and again, so a drift
    of the host's speed that is linear over the run weighs on both sides alike."""
    return lambda t: int(t // block_s) % 4 in (0, 3)


@dataclass
class Alternation:
    """Good calls while the bad tenant calls ("on") against good calls in the blocks between ("off"),
    over one run of a few seconds' blocks: the host's drift over minutes, which a phase between two
    baselines can only average out, cancels here."""
    phase: str
    blocks: int
    on_rate: float
    off_rate: float
    on_p99: float
    off_p99: float
    bad_n: int

    @property
    def ratio(self) -> float:
        return self.on_rate / self.off_rate if self.off_rate else float("nan")

    @property
    def p99_ratio(self) -> float:
        return self.on_p99 / self.off_p99 if self.off_p99 else float("nan")


def summarize_alternation(phase: str, calls: list[Call], block_s: float, blocks: int) -> Alternation:
    on_block = alternation_on(block_s)
    sides: dict[bool, list[float]] = {True: [], False: []}
    for c in calls:
        if c.good and c.done < blocks * block_s and c.done % block_s >= SETTLE_S:
            sides[on_block(c.done)].append(c.ms)
    counted_s = block_s - SETTLE_S
    on_blocks = sum(on_block(i * block_s) for i in range(blocks))
    on_s, off_s = on_blocks * counted_s, (blocks - on_blocks) * counted_s
    return Alternation(phase, blocks, len(sides[True]) / max(on_s, 1e-9), len(sides[False]) / max(off_s, 1e-9),
                       pct(sides[True], 0.99), pct(sides[False], 0.99),
                       sum(1 for c in calls if c.ok and not c.good))


def print_alternation_line(alt: Alternation) -> None:
    print(f"    alternating {alt.blocks} blocks: good {alt.on_rate:,.1f} req/s while {TITLES[alt.phase][4:]} "
          f"calls, {alt.off_rate:,.1f} between: {alt.ratio:.2f}x; p99 {alt.on_p99:,.1f} / {alt.off_p99:,.1f} ms: "
          f"{alt.p99_ratio:.2f}x; bad calls {alt.bad_n}", flush=True)


def bracketed(before: Figures, after: Figures, mem: dict) -> Figures:
    """The mean of the baseline runs either side of a phase: this host's speed drifts over minutes,
    and a phase compared with the first baseline alone took that drift for the phase's effect.
    Memory stays compared with the first baseline's (`mem`): engines only grow by what they hold."""
    def mean(name: str) -> float:
        return (getattr(before, name) + getattr(after, name)) / 2
    return Figures("baseline", before.good_n + after.good_n, mean("rate"), mean("p50"), mean("p99"), mean("chain_p50"),
                   mem=mem)


def summarize(phase: str, calls: list[Call], elapsed: float) -> Figures:
    good = [c for c in calls if c.good]
    last = max((c.done for c in good), default=elapsed)
    fig = Figures(phase, len(good), len(good) / max(last, 1e-9), median([c.ms for c in good]),
                  pct([c.ms for c in good], 0.99), median([c.chain_ms for c in good if c.chain_ms == c.chain_ms]))
    fig.slowest = max((c.ms for c in good), default=float("nan"))
    for role in {c.role for c in calls} - set(GOOD_ROLES):
        mine = [c for c in calls if c.role == role and c.ok]
        fig.bad[role] = {"n": len(mine), "first_ms": [c.ms for c in mine if c.first],
                         "later_p50": median([c.ms for c in mine if not c.first]),
                         "p50": median([c.ms for c in mine])}
    firsts = [c for c in calls if c.role == "many" and c.first and c.ok]
    fig.first_call_p50, fig.reached = median([c.ms for c in firsts]), len(firsts)
    fig.first_chain_p50 = median([c.chain_ms for c in firsts if c.chain_ms == c.chain_ms])
    fig.warm_p50 = median([c.ms for c in calls if c.role == "many" and not c.first and c.ok])
    step = max(last, 1e-9) / TIMELINE_BUCKETS
    counts = [0] * TIMELINE_BUCKETS
    for c in good:
        counts[min(TIMELINE_BUCKETS - 1, int(c.done / step))] += 1
    fig.timeline = [n / step for n in counts]
    for c in calls:
        if not c.ok:
            fig.failures[str(c.status)] = fig.failures.get(str(c.status), 0) + 1
    return fig


# ---------------------------------------------------------------- report

def _mib(kib: float) -> str:
    return f"{kib / 1024:,.0f} MiB"


def _check(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def print_phase_line(fig: Figures, title: str | None = None) -> None:
    bad = "; ".join(f"{role} n={b['n']} p50={b['p50']:,.0f} ms" for role, b in fig.bad.items())
    print(f"  {title or TITLES[fig.phase]}: {fig.good_n} good calls, {fig.rate:,.1f} req/s, p50 {fig.p50:,.1f} ms, "
          f"p99 {fig.p99:,.1f} ms, slowest {fig.slowest:,.0f} ms, in the view p50 {fig.chain_p50:,.1f} ms{'; ' + bad if bad else ''}; engines {_mib(fig.mem['engines'])} "
          f"({fig.mem['engines_n']}), web {_mib(fig.mem['web'])} ({fig.mem['web_n']})"
          f"{'; FAILED ' + str(fig.failures) if fig.failures else ''}", flush=True)
    # Where in the phase a dip happened (a bad tenant's first calls, or its steady state) shows here.
    print(f"    good req/s by tenth of the phase: {' '.join(f'{r:,.0f}' for r in fig.timeline)}", flush=True)


def phase_table(figs: list[Figures]) -> None:
    head = ("phase", "good req/s", "base req/s", "x base", "p50 ms", "in view p50", "p99 ms", "p99 x base", "target",
            "bad callers", "engines", "web", "failures")
    rows = [head]
    for f in figs:
        base = f.base or figs[0]
        rows.append((TITLES[f.phase], f"{f.rate:,.1f}", f"{base.rate:,.1f}", f"{f.rate / base.rate:.2f}x", f"{f.p50:,.1f}",
                     f"{f.chain_p50:,.1f}", f"{f.p99:,.1f}", f"{f.p99 / base.p99:.2f}x", _phase_target(f, base), _bad_cell(f),
                     f"{_mib(f.mem['engines'])} ({f.mem['engines_n']})", f"{_mib(f.mem['web'])} ({f.mem['web_n']})",
                     ", ".join(f"{k}: {v}" for k, v in f.failures.items()) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(cell.ljust(w) if i in (0, 8, 9) else cell.rjust(w)
                        for i, (cell, w) in enumerate(zip(r, widths, strict=True))).rstrip())


def _phase_target(f: Figures, base: Figures) -> str:
    ratio, p99x = f.rate / base.rate, f.p99 / base.p99
    if f.phase.startswith("runaway"):
        return f"{_at_least(f.phase, ratio, ' ')}, p99 {_p99_within(p99x, ' ')}"
    return _at_least(f.phase, ratio, " ") if f.phase in LEAST_RATIO else "-"


def _at_least(phase: str, ratio: float, gap: str = "  ") -> str:
    least = LEAST_RATIO[phase]
    return f">= {least:.2f}x{gap}{_check(ratio >= least)}"


def _p99_within(p99x: float, gap: str = "  ") -> str:
    return f"<= {MOST_P99X:g}x{gap}{_check(p99x <= MOST_P99X)}"


def _bad_cell(f: Figures) -> str:
    if f.phase == "many":
        return f"first call p50 {f.first_call_p50:,.1f} ms ({f.reached} accounts)"
    return "; ".join(f"{role} n={b['n']} p50={b['p50']:,.0f} ms" for role, b in f.bad.items()) or "-"


def target_rows(figs: list[Figures], accounts: int) -> list[tuple[str, str, str, str]]:
    """(figure, measured, ratio to baseline, target + ok/MISSED) for every target of issue 11."""
    rows = []
    for f in figs:
        base = f.base or figs[0]
        title, ratio = TITLES[f.phase], f.rate / base.rate
        if f.phase == "heavy":
            b = f.bad.get("heavy", {"n": 0, "p50": float("nan")})
            rows.append((f"{title}: good throughput", f"{f.rate:,.1f} req/s", f"{ratio:.2f}x",
                         _at_least("heavy", ratio)))
            rows.append((f"{title}: heavy caller's calls, p50", f"{b['n']}, {b['p50']:,.0f} ms",
                         f"{b['p50'] / base.p50:,.0f}x good p50", "(1 s of CPU each)"))
        if f.phase.startswith("runaway"):
            rows += _runaway_rows(f, base, title, ratio)
        if f.alternation is not None:
            rows += _alternation_rows(f.alternation, title)
        if f.phase == "many":
            rows += _many_rows(f, base, title, ratio, accounts)
        if f.phase == "busy":   # no target: what the machine's fair share leaves a lone tenant
            rows.append((f"{title}: one account's throughput, all 8 threads calling it", f"{f.rate:,.1f} req/s",
                         f"{ratio:.2f}x", "(no target: alone, an account may use the whole machine)"))
        rows.append((f"{title}: engine memory", _mib(f.mem["engines"]), f"{f.mem['engines'] / max(base.mem['engines'], 1):.2f}x",
                     f"<= 1 GiB  {_check(f.mem['engines'] <= GIB_KIB)}"))
    return rows


def _runaway_rows(f: Figures, base: Figures, title: str, ratio: float) -> list:
    b = f.bad.get("runaway", {"n": 0, "first_ms": [], "later_p50": float("nan")})
    first = max(b["first_ms"], default=float("nan"))
    firsts = ", ".join(f"{ms / 1000:.1f}" for ms in sorted(b["first_ms"]))
    return [
        (f"{title}: good throughput", f"{f.rate:,.1f} req/s", f"{ratio:.2f}x", _at_least(f.phase, ratio)),
        (f"{title}: good p99", f"{f.p99:,.1f} ms", f"{f.p99 / base.p99:.2f}x", _p99_within(f.p99 / base.p99)),
        (f"{title}: runaway first call (slowest; all s: {firsts or '-'})", f"{first / 1000:,.1f} s",
         f"{first / base.p50:,.0f}x good p50", f"<= 5.5 s  {_check(first <= 5500)}"),
        _later_row(f"{title}: runaway later calls p50 ({max(b['n'] - len(b['first_ms']), 0)} calls)",
                   b["later_p50"], base),
    ]


def _alternation_rows(alt: Alternation, title: str) -> list:
    rows = [(f"{title}: good throughput, alternate {alt.blocks} blocks", f"{alt.on_rate:,.1f} req/s",
             f"{alt.ratio:.2f}x", _at_least(alt.phase, alt.ratio))]
    if alt.phase != "heavy":
        rows.append((f"{title}: good p99, alternate {alt.blocks} blocks", f"{alt.on_p99:,.1f} ms",
                     f"{alt.p99_ratio:.2f}x", _p99_within(alt.p99_ratio)))
    return rows


def _later_row(name: str, later_p50: float, base: Figures) -> tuple:
    if later_p50 != later_p50:   # NaN: no runaway call after the first ones finished within the phase
        return name, "-", "-", "<= 50 ms  n/a (no later call)"
    return name, f"{later_p50:,.1f} ms", f"{later_p50 / base.p50:,.1f}x good p50", f"<= 50 ms  {_check(later_p50 <= 50)}"


def _many_rows(f: Figures, base: Figures, title: str, ratio: float, accounts: int) -> list:
    per_account = (f.mem["engines"] - base.mem["engines"]) / max(f.reached, 1)
    return [
        (f"{title}: throughput ({f.reached} of {accounts} accounts called)", f"{f.rate:,.1f} req/s",
         f"{ratio:.2f}x", _at_least("many", ratio)),
        (f"{title}: p50 / p99", f"{f.p50:,.1f} / {f.p99:,.1f} ms", f"{f.p50 / base.p50:.2f}x / {f.p99 / base.p99:.2f}x", ""),
        # Under a saturating closed loop every call queues (a warm one too, far past 10 ms), so the
        # 10 ms target is checked unloaded by bench/run.py; here the first call is set beside a warm one.
        (f"{title}: an account's first call under load, median (in the view {f.first_chain_p50:,.1f} ms)",
         f"{f.first_call_p50:,.1f} ms", f"{f.first_call_p50 / f.warm_p50:.1f}x a warm call here",
         f"warm {f.warm_p50:,.1f} ms; <= 10 ms unloaded: bench/run.py"),
        (f"{title}: engine memory per account called (vs baseline)", f"{per_account:,.0f} KiB", "",
         f"<= 256 KiB  {_check(per_account <= 256)}"),
    ]


def print_targets(rows: list) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for name, value, ratio, target in rows:
        print(f"{name:<{widths[0]}}  {value:>{widths[1]}}  {ratio:>{widths[2]}}  {target}".rstrip())

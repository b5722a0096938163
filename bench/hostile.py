"""Victims beside a deliberate tenant (issue 28): good accounts call in closed loops while one attacker
runs, and their p50 / p99 / max are printed beside each attacker as ratios to a quiet baseline.

Runs the engine tier as production does (a shared engine per core and one more, and the lane), with
the web side's part played here: a handler reported slow, or struck (a timeout, a wedge, a memory
charge), runs in the lane from its next call, as quarantine.mark_slow_lane / record_misbehaviour do.
Three strikes quarantine it, as HUB_QUARANTINE_STRIKES does. No Django, no HTTP: bench/load.py measures
the whole stack. Figures vary by machine; compare the ratios.

    .venv/bin/python bench/hostile.py [--seconds 10] [--victims 4] [--only NAME ...]

Issue 39's scenarios 2-5 are the JSON bomb, the native-work pair, the memory split and "compile" (an
account's pathological type checks beside other accounts' installs, in ms per compile).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from plugins_app.runtime.config import default_processes  # noqa: E402
from plugins_app.runtime.engine.supervisor import local_supervisor  # noqa: E402
from plugins_app.runtime.tables.hooks import HOOKS  # noqa: E402
from plugins_app.runtime.web.chain import Handler, run_chain  # noqa: E402
from plugins_app.runtime.web.tier import Tier, tier_for  # noqa: E402

SPEC = HOOKS["systemPrompt"]
CONTEXT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "You are a helpful agent."}
VICTIM = "let n = 0; globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' ' + (++n);"
BUSY = "const busy = (ms) => { const end = Date.now() + ms; while (Date.now() < end) {} };"
# Each attacker: its code, and how many accounts x connections call it.
ATTACKERS = {
    "for(;;)": ("globalThis.middleware.systemPrompt = async (c) => { for (;;) {} };", 1, 1),
    "await-then-loop": ("globalThis.middleware.systemPrompt = async (c) => { await null; for (;;) {} };", 1, 1),
    "timers": (BUSY + """globalThis.middleware.systemPrompt = async (c) => {
  await new Promise((resolve) => { let left = 999;
    for (let i = 0; i < 999; i++) setTimeout(() => { busy(4); if (--left === 0) resolve(); }, 0); });
  return c.systemPrompt; };""", 1, 1),
    "microtask flood": ("globalThis.middleware.systemPrompt = async (c) => { for (;;) { await null; } };", 1, 1),
    "sleep 4.9 s, 2 accounts x 3": (
        "globalThis.middleware.systemPrompt = async (c) => { await new Promise((r) => setTimeout(r, 4900));"
        " return c.systemPrompt; };", 2, 3),
    # Issue 39, items 2-4. The JSON bomb is the one that was reinstalled after every call: its strikes
    # follow its code now (services/plugins/strike_book.py), which this bench's Tenant plays by keeping them.
    "JSON bomb, reinstalled": ("globalThis.middleware.systemPrompt = async (c) => { let o = [c];"
                               " for (let i = 0; i < 22; i++) o = [o, o]; JSON.parse(JSON.stringify(o));"
                               " return c.systemPrompt; };", 1, 2),
    "typed array sort 32 Mi": ("globalThis.middleware.systemPrompt = async (c) => {"
                               " const a = new Uint32Array(32 * 1024 * 1024);"
                               " for (let i = 0; i < a.length; i += 4099) a[i] = i * 7; a.sort(); return c.systemPrompt; };",
                               1, 1),
    "Intl objects loop": ("globalThis.middleware.systemPrompt = async (c) => {"
                          " for (;;) new Intl.NumberFormat('en', { style: 'currency', currency: 'EUR' }); };", 1, 1),
    "memory split, 16 installs x 14 MiB": ("const keep = []; globalThis.middleware.systemPrompt = async (c) => {"
                                           " if (keep.length < 1) keep.push(new Array(1792 * 1024).fill(0.5));"
                                           " return c.systemPrompt; };", 1, 1),
}
# Attackers that are many installations of one account (each a Tenant of that account).
INSTALLATIONS = {"memory split, 16 installs x 14 MiB": 16}
# Issue 39, item 5: an account's pathological type checks beside other accounts' trivial installs.
PATHOLOGICAL_TYPES = ("type U = 'a'|'b'|'c'|'d'|'e'|'f'|'g'|'h'|'i'|'j';\ntype X = `${U}${U}${U}${U}`;\n"
                      + "".join(f"type T{i}<N extends unknown[] = []> = N['length'] extends 45 ? N : T{i}<[...N, X]>;\n"
                                f"const v{i}: T{i} = null as any as T{i};\n" for i in range(40))
                      + "globalThis.middleware.systemPrompt = async (c: any) => c.systemPrompt;")
TRIVIAL_TYPES = "const n: number = 1;\nglobalThis.middleware.systemPrompt = async (c: any) => `${c.systemPrompt} ${n}`;"
STRIKES, QUARANTINE_SECONDS, LANE_SECONDS = 3, 600, 600


@dataclass
class Tenant:
    """One account's installation as the web side would keep it: its lane, strikes and quarantine."""

    account: str
    handler: Handler
    strikes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def current(self) -> Handler:
        with self.lock:
            return self.handler

    def heard(self, trace) -> None:
        now = time.time()
        with self.lock:
            if trace.status == "timeout" or trace.crash in {"wedged", "memory"}:
                self.strikes += 1
                self.handler = replace(self.handler, slow_lane_until=now + LANE_SECONDS)
                if self.strikes >= STRIKES:
                    self.handler = replace(self.handler, quarantined_until=now + QUARANTINE_SECONDS)

    def slow(self, _handler: Handler) -> None:
        with self.lock:
            self.handler = replace(self.handler, slow_lane_until=time.time() + LANE_SECONDS)


def compile_handler(tier: Tier, source: str, n: int) -> Handler:
    compiled = tier.compile(source, "javascript")
    assert not compiled["errors"], compiled["errors"]
    return Handler(str(n), f"plugin-{n}", f"hash-{n}-{time.monotonic_ns()}", compiled["code"], {})


def call(tier: Tier, tenant: Tenant) -> tuple[float, str]:
    started = time.perf_counter()
    result = run_chain(tier, tenant.account, SPEC, [tenant.current()], CONTEXT, on_slow=tenant.slow)
    elapsed = time.perf_counter() - started
    tenant.heard(result.trace[0])
    return elapsed, result.trace[0].status


# An attacker's call costs it at least a web round trip. Without this floor, once its handler is
# quarantined (skipped without reaching an engine) its loop spins in this process at ~100k calls/s
# and takes the GIL from the victims' own client threads: the bench measured itself, not the tier.
ATTACKER_FLOOR_SECONDS = 0.002


def closed_loop(tier: Tier, tenant: Tenant, stop: threading.Event, out: list[tuple[float, str]],
                floor: float = 0.0) -> None:
    try:
        while not stop.is_set():
            elapsed, status = call(tier, tenant)
            out.append((elapsed, status))
            if elapsed < floor:
                time.sleep(floor - elapsed)
    finally:
        tier.shutdown()   # this thread's links


def phase(tier: Tier, victims: list[Tenant], attackers: list[Tenant], connections: int,
          seconds: float) -> tuple[list[float], int]:
    """Victims' latencies (seconds) and how many of their calls did not answer `ran`."""
    stop = threading.Event()
    samples: list[list[tuple[float, str]]] = [[] for _ in victims]
    threads = [threading.Thread(target=closed_loop, args=(tier, v, stop, s)) for v, s in zip(victims, samples, strict=True)]
    threads += [threading.Thread(target=closed_loop, args=(tier, a, stop, [], ATTACKER_FLOOR_SECONDS), daemon=True)
                for a in attackers for _ in range(connections)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(15)   # an attacker's call in flight ends within its budget
    flat = [s for per in samples for s in per]
    return [t for t, _ in flat], sum(1 for _, status in flat if status != "ran")


def compile_phase(tier: Tier, victims: int, attackers: int, seconds: float) -> tuple[list[float], int]:
    """Victim accounts' trivial type-checked compiles (seconds each) and how many did not compile,
    while one account sends pathological checks from `attackers` connections."""
    stop = threading.Event()
    samples: list[list[tuple[float, bool]]] = [[] for _ in range(victims)]

    def victim(n: int) -> None:
        try:
            while not stop.is_set():
                started = time.perf_counter()
                ok = not tier.compile(TRIVIAL_TYPES, "typescript", True, f"victim-{n}").get("errors", True)
                samples[n].append((time.perf_counter() - started, ok))
        finally:
            tier.shutdown()

    def attacker() -> None:
        try:
            while not stop.is_set():
                tier.compile(PATHOLOGICAL_TYPES, "typescript", True, "attacker")
        finally:
            tier.shutdown()

    threads = [threading.Thread(target=victim, args=(n,)) for n in range(victims)]
    threads += [threading.Thread(target=attacker, daemon=True) for _ in range(attackers)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(30)
    flat = [s for per in samples for s in per]
    return [t for t, _ in flat], sum(1 for _, ok in flat if not ok)


def compile_figures(tier: Tier, seconds: float) -> None:
    tier.compile(TRIVIAL_TYPES, "typescript", True, "warm-up")   # the library parsed once
    quiet, _ = compile_phase(tier, 2, 0, seconds)
    base = figures(quiet)
    latencies, failed = compile_phase(tier, 2, 8, seconds)
    p50, p99, worst = figures(latencies)
    print(f"{'(compile quiet)':<30} {len(quiet):>7} {base[0]:>8.1f} {base[1]:>8.1f} {base[2]:>8.1f}")
    print(f"{'type checks, 8 connections':<30} {len(latencies):>7} {p50:>8.1f} {p99:>8.1f} {worst:>8.1f}"
          f" {p50 / base[0]:>6.2f} {p99 / base[1]:>6.2f} {failed:>8}  target: victims' installs <= 3 s:"
          f" {'met' if worst <= 3000 else 'NOT met'}")


def figures(latencies: list[float]) -> tuple[float, float, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000, ordered[-1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="each phase's length")
    parser.add_argument("--victims", type=int, default=4, help="good accounts, one connection each")
    parser.add_argument("--engines", type=int, default=default_processes(),
                        help="shared engines (default: HUB_ENGINE_PROCESSES's, one per core and one more)")
    parser.add_argument("--only", action="append", choices=sorted([*ATTACKERS, "compile"]),
                        help="run only these attackers ('compile': item 5's type checks)")
    args = parser.parse_args()
    supervisor = local_supervisor(engines=args.engines, lane=1)
    tier = tier_for(supervisor.describe())
    try:
        victims = [Tenant(f"victim-{i}", compile_handler(tier, VICTIM, 100 + i)) for i in range(args.victims)]
        for victim in victims:
            call(tier, victim)   # warm: each victim's compartment is loaded
        quiet, _ = phase(tier, victims, [], 0, args.seconds)
        base = figures(quiet)
        print(f"{'attacker':<30} {'calls':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
              f" {'p50 x':>6} {'p99 x':>6} {'not ran':>8}  targets: p99 <= 3x, max <= 250 ms")
        print(f"{'(quiet baseline)':<30} {len(quiet):>7} {base[0]:>8.2f} {base[1]:>8.2f} {base[2]:>8.1f}")
        for n, (name, (source, accounts, connections)) in enumerate(ATTACKERS.items()):
            if args.only and name not in args.only:
                continue
            installs = INSTALLATIONS.get(name, 1)
            attackers = [Tenant(f"attacker-{n}-{i}", compile_handler(tier, source, 1000 * n + 100 * i + k))
                         for i in range(accounts) for k in range(installs)]
            latencies, failed = phase(tier, victims, attackers, connections, args.seconds)
            p50, p99, worst = figures(latencies)
            verdict = "met" if p99 <= 3 * base[1] and worst <= 250 else "NOT met"
            print(f"{name:<30} {len(latencies):>7} {p50:>8.2f} {p99:>8.2f} {worst:>8.1f}"
                  f" {p50 / base[0]:>6.2f} {p99 / base[1]:>6.2f} {failed:>8}  {verdict}")
        if not args.only or "compile" in args.only:
            compile_figures(tier, args.seconds)
    finally:
        tier.shutdown()
        supervisor.stop()


if __name__ == "__main__":
    main()

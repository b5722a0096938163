"""Multi-tenant load on a real gunicorn (issue 11): good accounts beside CPU-heavy and runaway ones, then many accounts."""

from __future__ import annotations

import argparse
import datetime
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATH = "/api/v1/hooks/userMessageInbound/execute"
BODY = json.dumps({"context": {"sessionId": "1", "channelId": None, "text": "hello 4111 1111 1111 1111",
                               "mediaIds": []}})
TIMEOUT_S = 30
GIB_KIB = 1024 * 1024

HOOK = "globalThis.middleware.userMessageInbound = "
GOOD_SOURCES = {   # three small text rewrites
    "mask cards": HOOK + "async (c) => c.text.replace(/\\d{4}( \\d{4}){3}/g, '[card]');",
    "greeting": HOOK + "async (c) => c.text.replace(/^hello/, 'Hello');",
    "tag": HOOK + "async (c) => c.text + ' [checked]';",
}
HEAVY_SOURCE = HOOK + "async (c) => { const t = Date.now(); while (Date.now() - t < 1000) {} return c.text; };"
RUNAWAY_SOURCE = HOOK + "async (c) => { await null; while (true) {} };"
MANY_SOURCES = {"mask cards": GOOD_SOURCES["mask cards"]}

PHASES = ("baseline", "heavy", "runaway2", "runaway4", "many")
TITLES = {"baseline": "1 baseline: 8 good", "heavy": "2 + CPU-heavy x1", "runaway2": "3 + runaway x2",
          "runaway4": "4 + runaway x4", "many": "5 many accounts"}


# ---------------------------------------------------------------- setup (runs in its own Django process)

def setup_main() -> None:
    """Read a plan {account: {plugin name: source}} on stdin; create accounts, keys and plugins in this
    one process; print {account: raw key} as JSON on the last stdout line."""
    import django
    django.setup()
    from django.db import transaction

    from accounts import services as accounts
    from accounts.models import Account
    from plugins_app.services import plugins

    _memoize_compile(plugins)
    plan, keys = json.load(sys.stdin), {}
    names = list(plan)
    try:
        for start in range(0, len(names), 200):   # one transaction per batch: SQLite syncs once
            with transaction.atomic():
                for name in names[start:start + 200]:
                    keys[name] = accounts.create_api_key(name, key_name="bench")
                    account = Account.objects.get(name=name)
                    for plugin_name, source in plan[name].items():
                        plugins.install_plugin(account, name=plugin_name, source=source, language="javascript")
    finally:
        _stop_engines()
    print(json.dumps(keys))


def _stop_engines() -> None:
    """A process-owned pool is shut down here; an engine tier started on first use stops at exit by itself."""
    from plugins_app.services import engine
    if hasattr(engine, "get_pool"):
        engine.get_pool().shutdown()


def _memoize_compile(plugins) -> None:
    """Each distinct source is compiled once; install_plugin reuses the result."""
    original, cache = plugins.compile_source, {}

    def compile_once(source, language):
        if (source, language) not in cache:
            cache[source, language] = original(source, language)
        return dict(cache[source, language])

    plugins.compile_source = compile_once


def setup_accounts(env: dict, plan: dict) -> dict:
    code = "import sys; sys.path.insert(0, 'bench'); import load; load.setup_main()"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(env, DJANGO_SETTINGS_MODULE=
                          env.get("DJANGO_SETTINGS_MODULE", "middleware_hub.settings")),
                          input=json.dumps(plan), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"setup failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_plan(args) -> dict:
    plan = {f"good-{i}": GOOD_SOURCES for i in range(args.threads)}
    if "heavy" in args.phases:
        plan["heavy"] = {"burn": HEAVY_SOURCE}
    for phase in ("runaway2", "runaway4"):
        if phase in args.phases:
            plan[phase] = {"spin": RUNAWAY_SOURCE}
    if "many" in args.phases:
        plan.update({f"many-{i:05d}": MANY_SOURCES for i in range(args.accounts)})
    return plan


# ---------------------------------------------------------------- server

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def manage(env: dict, *args: str) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True).stdout


def start_server(env: dict, port: int, workers: int, log) -> subprocess.Popen:
    """gunicorn from the project directory, so gunicorn.conf.py and the environment decide the rest."""
    return subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "middleware_hub.wsgi", "-b", f"127.0.0.1:{port}", "-w", str(workers),
         "--log-level", "warning"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)   # its own process group: every child can be found and stopped


def wait_ready(server: subprocess.Popen, port: int, key: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"gunicorn exited with {server.returncode} before answering")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("POST", "/api/v1/ping", "{}", {"Authorization": f"Bearer {key}",
                                                        "Content-Type": "application/json"})
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("gunicorn did not start")


def stop_server(server: subprocess.Popen) -> None:
    """Terminate gunicorn, wait, then kill whatever is left of its tree and its process group."""
    tree = process_tree(server.pid)   # before the master goes: orphans lose their ppid link
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            pass
    for pid, started in tree:
        if _start_time(pid) == started:
            _kill(pid)
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    server.wait()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- /proc

def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()   # fields from 3 (state) on; comm may hold spaces


def _start_time(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[19] if fields else None


def process_tree(root: int) -> list[tuple[int, str]]:
    """(pid, start time) of root and every descendant, following ppid links in /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))):
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if (started := _start_time(pid)) is not None:
            found.append((pid, started))
            todo.extend(children.get(pid, []))
    return found


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def memory(master: int) -> dict:
    """Summed RSS (KiB) of the gunicorn tree: engines (cmdline has plugins_app.runtime) and web (the rest)."""
    out = {"web": 0, "engines": 0, "web_n": 0, "engines_n": 0}
    for pid, _ in process_tree(master):
        kind = "engines" if "plugins_app.runtime" in _cmdline(pid) else "web"
        out[kind] += _rss_kib(pid)
        out[kind + "_n"] += 1
    return out


# ---------------------------------------------------------------- client

class Caller:
    """One thread's keep-alive connection to the hub; reconnects when the server closes it."""

    def __init__(self, port: int):
        self.port = port
        self.conn: http.client.HTTPConnection | None = None

    def call(self, key: str) -> tuple[object, float]:
        """(HTTP status, or 'timeout' / an exception name; milliseconds)."""
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.chain_ms = float("nan")
        for attempt in (0, 1):
            fresh = self.conn is None
            if fresh:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
            started = time.perf_counter()
            try:
                self.conn.request("POST", PATH, BODY, headers)
                response = self.conn.getresponse()
                response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if fresh or attempt:   # a kept-alive socket the server had closed: once more on a new one
                    return type(exc).__name__, _ms(started)
                continue
            except TimeoutError:
                self.close()
                return "timeout", _ms(started)
            except OSError as exc:
                self.close()
                return type(exc).__name__, _ms(started)
            if response.will_close:
                self.close()
            self.chain_ms = _server_timing(response.getheader("Server-Timing"))
            return response.status, _ms(started)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _server_timing(header: str | None) -> float:
    """The execute view's own time ("chain;dur=1.23"): the rest of a call is the network and waiting for a worker."""
    try:
        return float(header.split("dur=")[1].split(",")[0])
    except (AttributeError, IndexError, ValueError):
        return float("nan")


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


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


@dataclass
class Lane:
    """A client thread: its role and how it picks the next key -> (key, is that account's first call)."""
    role: str
    pick: object


def good_lanes(keys: dict, threads: int) -> list[Lane]:
    return [Lane("good", _fixed(keys[f"good-{i}"])) for i in range(threads)]


def bad_lanes(role: str, key: str, threads: int) -> list[Lane]:
    return [Lane(role, _fixed(key)) for _ in range(threads)]


def many_lanes(keys: list[str], threads: int) -> list[Lane]:
    counter, lock = itertools.count(), threading.Lock()

    def pick():
        with lock:
            n = next(counter)
        return keys[n % len(keys)], n < len(keys)

    return [Lane("many", pick) for _ in range(threads)]


def _fixed(key: str):
    seen = []

    def pick():
        first = not seen
        seen.append(1)
        return key, first

    return pick


def run_phase(port: int, lanes: list[Lane], seconds: float, max_requests: int) -> tuple[list[Call], float]:
    """Every lane calls until the deadline or until the phase's request budget is spent."""
    calls: list[Call] = []
    tickets, started = itertools.count(), time.perf_counter()
    deadline = started + seconds

    def loop(index: int, lane: Lane):
        caller = Caller(port)
        try:
            while time.perf_counter() < deadline and next(tickets) < max_requests:
                key, first = lane.pick()
                status, ms = caller.call(key)
                calls.append(Call(lane.role, index, first, time.perf_counter() - started, ms, status, caller.chain_ms))
        finally:
            caller.close()

    threads = [threading.Thread(target=loop, args=(i, lane), daemon=True) for i, lane in enumerate(lanes)]
    for t in threads:
        t.start()
    for t in threads:   # in slices, so Ctrl-C is seen; bounded by the deadline plus one request's timeout
        while t.is_alive() and time.perf_counter() < deadline + TIMEOUT_S + 10:
            t.join(0.5)
    return calls, time.perf_counter() - started


def warm_up(port: int, keys: dict, threads: int, seconds: float = 5.0) -> list[Call]:
    # Time-based: a few hundred calls left the baseline phase still paying for warm-up (it came
    # out below phases that ran with a bad tenant beside it).
    lanes = good_lanes(keys, threads)
    return run_phase(port, lanes, seconds, 50_000)[0]


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
    bad: dict = field(default_factory=dict)   # role -> dict(n, first_ms, later_p50)
    first_call_p50: float = float("nan")      # many: median of each account's first call
    first_chain_p50: float = float("nan")     # ... of which inside the execute view (Server-Timing)
    warm_p50: float = float("nan")            # many: the same accounts' later calls
    reached: int = 0
    failures: dict = field(default_factory=dict)   # status -> count (non-2xx, errors, timeouts)
    mem: dict = field(default_factory=dict)
    timeline: list = field(default_factory=list)   # good req/s in each tenth of the phase
    base: Figures | None = None   # what its ratios are to: the baselines just before and after it


def bracketed(before: Figures, after: Figures, mem: dict) -> Figures:
    """The mean of the baseline runs either side of a phase: this host's speed drifts over minutes,
    and a phase compared with the first baseline alone took that drift for the phase's effect.
    Memory stays compared with the first baseline's (`mem`): engines only grow by what they hold."""
    def mean(name: str) -> float:
        return (getattr(before, name) + getattr(after, name)) / 2
    return Figures("baseline", before.good_n + after.good_n, mean("rate"), mean("p50"), mean("p99"), mean("chain_p50"),
                   mem=mem)


def summarize(phase: str, calls: list[Call], elapsed: float) -> Figures:
    good = [c for c in calls if c.role in ("good", "many") and c.ok]
    last = max((c.done for c in good), default=elapsed)
    fig = Figures(phase, len(good), len(good) / max(last, 1e-9), median([c.ms for c in good]),
                  pct([c.ms for c in good], 0.99), median([c.chain_ms for c in good if c.chain_ms == c.chain_ms]))
    for role in {c.role for c in calls} - {"good", "many"}:
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


def lanes_for(phase: str, keys: dict, args) -> list[Lane]:
    if phase == "many":
        return many_lanes([keys[k] for k in sorted(keys) if k.startswith("many-")], args.threads)
    lanes = good_lanes(keys, args.threads)
    extra = {"heavy": ("heavy", 1), "runaway2": ("runaway", 2), "runaway4": ("runaway", 4)}.get(phase)
    if extra:
        lanes += bad_lanes(extra[0], keys[phase], extra[1])
    return lanes


# ---------------------------------------------------------------- report

def _mib(kib: float) -> str:
    return f"{kib / 1024:,.0f} MiB"


def _check(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def print_phase_line(fig: Figures, title: str | None = None) -> None:
    bad = "; ".join(f"{role} n={b['n']} p50={b['p50']:,.0f} ms" for role, b in fig.bad.items())
    print(f"  {title or TITLES[fig.phase]}: {fig.good_n} good calls, {fig.rate:,.1f} req/s, p50 {fig.p50:,.1f} ms, "
          f"p99 {fig.p99:,.1f} ms, in the view p50 {fig.chain_p50:,.1f} ms{'; ' + bad if bad else ''}; engines {_mib(fig.mem['engines'])} "
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
    if f.phase == "heavy":
        return f">= 0.60x {_check(ratio >= 0.6)}"
    if f.phase.startswith("runaway"):
        return f">= 0.70x {_check(ratio >= 0.7)}, p99 <= 3x {_check(p99x <= 3)}"
    if f.phase == "many":
        return f">= 0.40x {_check(ratio >= 0.4)}"
    return "-"


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
                         f">= 0.60x  {_check(ratio >= 0.6)}"))
            rows.append((f"{title}: heavy caller's calls, p50", f"{b['n']}, {b['p50']:,.0f} ms",
                         f"{b['p50'] / base.p50:,.0f}x good p50", "(1 s of CPU each)"))
        if f.phase.startswith("runaway"):
            rows += _runaway_rows(f, base, title, ratio)
        if f.phase == "many":
            rows += _many_rows(f, base, title, ratio, accounts)
        rows.append((f"{title}: engine memory", _mib(f.mem["engines"]), f"{f.mem['engines'] / max(base.mem['engines'], 1):.2f}x",
                     f"<= 1 GiB  {_check(f.mem['engines'] <= GIB_KIB)}"))
    return rows


def _runaway_rows(f: Figures, base: Figures, title: str, ratio: float) -> list:
    b = f.bad.get("runaway", {"n": 0, "first_ms": [], "later_p50": float("nan")})
    first = max(b["first_ms"], default=float("nan"))
    firsts = ", ".join(f"{ms / 1000:.1f}" for ms in sorted(b["first_ms"]))
    return [
        (f"{title}: good throughput", f"{f.rate:,.1f} req/s", f"{ratio:.2f}x", f">= 0.70x  {_check(ratio >= 0.7)}"),
        (f"{title}: good p99", f"{f.p99:,.1f} ms", f"{f.p99 / base.p99:.2f}x", f"<= 3x  {_check(f.p99 / base.p99 <= 3)}"),
        (f"{title}: runaway first call (slowest; all s: {firsts or '-'})", f"{first / 1000:,.1f} s",
         f"{first / base.p50:,.0f}x good p50", f"<= 5.5 s  {_check(first <= 5500)}"),
        _later_row(f"{title}: runaway later calls p50 ({max(b['n'] - len(b['first_ms']), 0)} calls)",
                   b["later_p50"], base),
    ]


def _later_row(name: str, later_p50: float, base: Figures) -> tuple:
    if later_p50 != later_p50:   # NaN: no runaway call after the first ones finished within the phase
        return name, "-", "-", "<= 50 ms  n/a (no later call)"
    return name, f"{later_p50:,.1f} ms", f"{later_p50 / base.p50:,.1f}x good p50", f"<= 50 ms  {_check(later_p50 <= 50)}"


def _many_rows(f: Figures, base: Figures, title: str, ratio: float, accounts: int) -> list:
    per_account = (f.mem["engines"] - base.mem["engines"]) / max(f.reached, 1)
    return [
        (f"{title}: throughput ({f.reached} of {accounts} accounts called)", f"{f.rate:,.1f} req/s",
         f"{ratio:.2f}x", f">= 0.40x  {_check(ratio >= 0.4)}"),
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


def print_header(args) -> None:
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    tuned = {k: v for k, v in os.environ.items()
             if k.startswith(("HOOK_", "HUB_", "GUNICORN", "WEB_CONCURRENCY", "DJANGO_"))}
    print(f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}  commit: {commit}  "
          f"machine: nproc {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.2f}, "
          f"python {sys.version.split()[0]}")
    print(f"server: python -m gunicorn middleware_hub.wsgi -w {args.workers} (gunicorn.conf.py from {ROOT}), "
          f"DJANGO_DEBUG=0, SQLite; environment: {tuned or 'nothing hub-specific'}")
    print(f"client: {args.threads} threads, keep-alive, {args.phase_seconds:g} s or {args.max_requests:,} "
          f"requests per phase, {TIMEOUT_S} s per request; phases: {', '.join(args.phases)}", flush=True)


# ---------------------------------------------------------------- main

def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workers", type=int, default=2, help="gunicorn -w (default 2)")
    p.add_argument("--threads", type=int, default=8, help="good client threads (default 8)")
    p.add_argument("--phase-seconds", type=float, default=20, help="each phase's duration (default 20)")
    p.add_argument("--accounts", type=int, default=1000, help="accounts in the many-accounts phase (default 1000)")
    p.add_argument("--phases", default=",".join(PHASES),
                   help=f"comma-separated subset of {','.join(PHASES)} or 1-5 (baseline always runs)")
    p.add_argument("--max-requests", type=int, default=50_000, help="request cap per phase (default 50,000)")
    p.add_argument("--no-bracket", dest="bracket", action="store_false",
                   help="compare every phase with the first baseline only, instead of running the baseline again "
                        "after each phase and comparing with the mean of the runs either side (quicker, noisier)")
    args = p.parse_args()
    chosen = {PHASES[int(x) - 1] if x.strip().isdigit() else x.strip() for x in args.phases.split(",") if x.strip()}
    unknown = chosen - set(PHASES)
    if unknown:
        p.error(f"unknown phase(s): {', '.join(sorted(unknown))}")
    args.phases = [ph for ph in PHASES if ph in chosen | {"baseline"}]
    return args


def run(args, workdir: Path) -> list[Figures]:
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{workdir / 'load.sqlite3'}", DJANGO_DEBUG="0")
    print_header(args)
    started = time.perf_counter()
    manage(env, "migrate", "--noinput")
    migrated = time.perf_counter()
    plan = build_plan(args)
    keys = setup_accounts(env, plan)
    print(f"setup: migrate {migrated - started:.1f} s; {len(plan)} accounts, "
          f"{sum(len(p) for p in plan.values())} plugins in {time.perf_counter() - migrated:.1f} s", flush=True)
    log = open(workdir / "server.log", "wb")
    port = free_port()
    server = start_server(env, port, args.workers, log)
    figs: list[Figures] = []
    try:
        wait_ready(server, port, keys["good-0"])
        warm = warm_up(port, keys, args.threads)
        print(f"warm-up: {len(warm)} calls on the good accounts", flush=True)
        def measured(phase: str, title: str | None = None) -> Figures:
            calls, elapsed = run_phase(port, lanes_for(phase, keys, args), args.phase_seconds,
                                       args.max_requests)
            fig = summarize(phase, calls, elapsed)
            fig.mem = memory(server.pid)
            print_phase_line(fig, title)
            return fig

        before = None
        for phase in args.phases:
            fig = measured(phase)
            figs.append(fig)
            if phase == "baseline":
                fig.base = before = fig
            elif args.bracket and before is not None:
                again = measured("baseline", f"  baseline again, after {TITLES[phase]}")
                fig.base, before = bracketed(before, again, figs[0].mem), again
            else:
                fig.base = figs[0]
    finally:
        stop_server(server)
        log.close()
        _print_log_tail(workdir / "server.log")
    return figs


def _print_log_tail(path: Path, lines: int = 8) -> None:
    text = path.read_text(errors="replace").splitlines()
    if text:
        print(f"server log: {len(text)} lines; last {min(lines, len(text))}:")
        for line in text[-lines:]:
            print(f"  | {line[:200]}")


def _on_term(signum, frame):
    raise KeyboardInterrupt


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _on_term)
    workdir = Path(tempfile.mkdtemp(prefix="hub-load-"))
    try:
        figs = run(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    phase_table(figs)
    print()
    print_targets(target_rows(figs, args.accounts))
    failures: dict[str, int] = {}
    for f in figs:
        for status, n in f.failures.items():
            if status != "timeout":
                failures[status] = failures.get(status, 0) + n
    timeouts = sum(f.failures.get("timeout", 0) for f in figs)
    if timeouts:
        print(f"\n{timeouts} call(s) got no answer within {TIMEOUT_S} s (counted above, not a failure of the run)")
    if failures:
        print(f"\nFAILED: answers other than 2xx or broken connections: {failures}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted: the server and its children were stopped", file=sys.stderr)
        sys.exit(130)

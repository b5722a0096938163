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
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from load_report import (
    ALTERNATED,
    PHASES,
    TITLES,
    Alternation,
    Call,
    Figures,
    alternation_on,
    bracketed,
    phase_table,
    print_alternation_line,
    print_phase_line,
    print_targets,
    summarize,
    summarize_alternation,
    target_rows,
)

ROOT = Path(__file__).resolve().parents[1]
PATH = "/api/v1/hooks/userMessageInbound/execute"
BODY = json.dumps({"context": {"sessionId": "1", "channelId": None, "text": "hello 4111 1111 1111 1111",
                               "mediaIds": []}})
TIMEOUT_S = 30

HOOK = "globalThis.middleware.userMessageInbound = "
GOOD_SOURCES = {   # three small text rewrites
    "mask cards": HOOK + "async (c) => c.text.replace(/\\d{4}( \\d{4}){3}/g, '[card]');",
    "greeting": HOOK + "async (c) => c.text.replace(/^hello/, 'Hello');",
    "tag": HOOK + "async (c) => c.text + ' [checked]';",
}
HEAVY_SOURCE = HOOK + "async (c) => { const t = Date.now(); while (Date.now() - t < 1000) {} return c.text; };"
RUNAWAY_SOURCE = HOOK + "async (c) => { await null; while (true) {} };"
MANY_SOURCES = {"mask cards": GOOD_SOURCES["mask cards"]}



# ---------------------------------------------------------------- setup (runs in its own Django process)

def setup_main() -> None:
    """Read a plan {account: {plugin name: source}} on stdin; create accounts, keys and plugins in this
    one process; print {account: raw key} as JSON on the last stdout line."""
    import django
    django.setup()
    from django.db import transaction

    from accounts import services as accounts
    from accounts.models import Account
    from plugins_app.services.plugins import installations as plugins

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
    from plugins_app.services.engine import tier as engine
    if hasattr(engine, "get_pool"):
        engine.get_pool().shutdown()


def _memoize_compile(plugins) -> None:
    """Each distinct source is compiled once; install_plugin reuses the result."""
    original, cache = plugins.compile_source, {}

    def compile_once(source, language, **options):   # typecheck=...: install_plugin passes it (issue 30)
        known = (source, language, tuple(sorted(options.items())))
        if known not in cache:
            cache[known] = original(source, language, **options)
        return dict(cache[known])

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
class Lane:
    """A client thread: its role, how it picks the next key -> (key, is that account's first call), and
    when it calls (`on`, given seconds since the phase started; always when None)."""
    role: str
    pick: object
    on: object = None


def good_lanes(keys: dict, threads: int) -> list[Lane]:
    return [Lane("good", _fixed(keys[f"good-{i}"])) for i in range(threads)]


def one_account_lanes(role: str, key: str, threads: int, on=None) -> list[Lane]:
    return [Lane(role, _fixed(key), on) for _ in range(threads)]


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
            while time.perf_counter() < deadline:
                if lane.on is not None and not lane.on(time.perf_counter() - started):
                    time.sleep(0.01)
                    continue
                if next(tickets) >= max_requests:
                    break
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


def lanes_for(phase: str, keys: dict, args, on=None) -> list[Lane]:
    """The phase's client threads; `on`, when given, says when its bad tenant's threads call."""
    if phase == "many":
        return many_lanes([keys[k] for k in sorted(keys) if k.startswith("many-")], args.threads)
    if phase == "busy":   # a lone tenant with many agents: every thread calls the same account
        return one_account_lanes("good", keys["good-0"], args.threads)
    lanes = good_lanes(keys, args.threads)
    extra = {"heavy": ("heavy", 1), "runaway2": ("runaway", 2), "runaway4": ("runaway", 4)}.get(phase)
    if extra:
        lanes += one_account_lanes(extra[0], keys[phase], extra[1], on)
    return lanes


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
                   help=f"comma-separated subset of {','.join(PHASES)} or 1-{len(PHASES)} (baseline always runs)")
    p.add_argument("--alternate-seconds", type=float, default=60,
                   help="after each bad-tenant phase, this long with the bad tenant calling in alternate blocks and "
                        "the good accounts throughout (0 = skip; default 60)")
    p.add_argument("--block-seconds", type=float, default=5, help="an alternation's block (default 5)")
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

        def alternated(phase: str) -> Alternation:
            blocks = max(2, round(args.alternate_seconds / args.block_seconds))
            on = alternation_on(args.block_seconds)
            calls, _ = run_phase(port, lanes_for(phase, keys, args, on), blocks * args.block_seconds,
                                 args.max_requests)
            alt = summarize_alternation(phase, calls, args.block_seconds, blocks)
            print_alternation_line(alt)
            return alt

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
            if phase in ALTERNATED and args.alternate_seconds > 0:
                fig.alternation = alternated(phase)
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

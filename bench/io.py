"""Plugins that wait on I/O (issue 38): a real hub served as docs/production.md serves it, a tenant whose
plugin awaits `host.fetch` of a loopback server that answers after a delay, and quiet tenants (no I/O)
beside it. Prints, side by side in one run, each load's calls/s against its ideal, p50/p99, errors, the
hub's resident memory, and the quiet tenants' p99 / max / calls/s against their run alone, with a
pass/fail column for the issue's targets.

    .venv/bin/python bench/io.py [--scenarios one16,eight,a,b,c] [--seconds 6] [--worker-class ...]

Processes: this one (orchestrates, samples the hub's memory), a delay server (asyncio), and a client
process per group of callers (asyncio, one keep-alive HTTP/1.1 connection per caller), so neither the
server nor the quiet tenants' client shares a loop or a GIL with the 1,000-caller load. 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from io_report import TARGETS, Call, Figures, ideal_rate, num, pooled, quiet_alone_row, row, summarize, table  # noqa: E402
from load import _cmdline as cmdline  # noqa: E402
from load import (  # noqa: E402
    _memoize_compile,
    _stat,
    _stop_engines,
    free_port,
    manage,
    process_tree,
    stop_server,
    wait_ready,
)
from load import _rss_kib as rss_kib  # noqa: E402

HOST = "127.0.0.1"
PATH = "/api/v1/hooks/userMessageInbound/execute"
TEXT = "hello there"
BODY = json.dumps({"context": {"sessionId": "1", "channelId": None, "text": TEXT, "mediaIds": []}})

HOOK = "globalThis.middleware.userMessageInbound = "
# The tenant: one host call, then a veto or the text as it was.
IO_SOURCE = (HOOK + "async (c, tools) => { const r = await host.fetch(%r); "
             "return (await r.json()).ok ? c.text : tools.cancel('blocked'); };")
QUIET_SOURCE = HOOK + "async (c) => c.text.trim();"
# What each role's 200 answers must say: anything else is counted as an error.
EXPECTED = {"io": "unchanged", "quiet": "unchanged", "blocked": "cancelled"}


@dataclass(frozen=True)
class Scenario:
    title: str
    accounts: int
    per_account: int
    delay_s: float
    seconds: float

    @property
    def callers(self) -> int:
        return self.accounts * self.per_account


SCENARIOS = {
    # Issue 38's first table, kept measurable.
    "one16": Scenario("one account x 16 callers", 1, 16, 0.2, 8),
    "eight": Scenario("8 accounts x 4 callers", 8, 4, 0.2, 8),
    # Its "Done when".
    "a": Scenario("(a) one account x 64 callers", 1, 64, 0.2, 10),
    "b": Scenario("(b) 50 accounts x 4 callers", 50, 4, 1.0, 15),
    "c": Scenario("(c) 1,000 callers: 250 accounts x 4", 250, 4, 2.0, 20),
}


# ================================================================ the delay server (its own process)

class DelayServer:
    """Answers every request after `delay` seconds, {"ok": true} (false under /block), keep-alive
    unless asked to close. Control: GET /__delay/<ms>, GET /__stats. A waiting request is a sleeping
    coroutine: thousands cost a few MiB."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.served = 0
        self.inflight = 0
        self.peak = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                if len(parts) != 3:
                    return
                headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
                length = int(headers.get("content-length") or 0)
                if length:
                    await reader.readexactly(length)
                close = parts[2] == "HTTP/1.0" or headers.get("connection", "").lower() == "close"
                body = json.dumps(await self.answer(parts[1])).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
                             % (len(body), b"Connection: close\r\n" if close else b"", body))
                await writer.drain()
                if close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def answer(self, target: str) -> dict:
        if target.startswith("/__delay/"):
            self.delay = float(target.rsplit("/", 1)[1]) / 1000
            return {"delayMs": self.delay * 1000}
        if target.startswith("/__stats"):
            stats = {"served": self.served, "inflight": self.inflight, "peak": self.peak, "delayMs": self.delay * 1000}
            if "reset" in target:
                self.peak = self.inflight
            return stats
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        try:
            if self.delay > 0:
                await asyncio.sleep(self.delay)
        finally:
            self.inflight -= 1
        self.served += 1
        return {"ok": not target.startswith("/block")}


async def _serve_delays() -> None:
    server = DelayServer()
    listener = await asyncio.start_server(server.handle, HOST, 0, backlog=4096)
    print(listener.sockets[0].getsockname()[1], flush=True)
    await listener.serve_forever()


def _new_loop() -> None:
    try:   # cheaper per call than the default loop; the figures do not depend on it
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass


# ================================================================ the client (its own process)

class Connection:
    """One caller's keep-alive HTTP/1.1 connection over asyncio streams."""

    def __init__(self, port: int, request: bytes):
        self.port, self.request = port, request
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(HOST, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def call(self) -> tuple[int, dict, bytes]:
        """(status, headers, body). A kept-alive connection the server had closed before reading the
        request (nothing came back) is opened again and the request sent once more."""
        for attempt in (0, 1):
            fresh = self.writer is None
            if fresh:
                await self.open()
            assert self.reader is not None and self.writer is not None
            try:
                self.writer.write(self.request)
                head = await self.reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                self.close()
                if fresh or attempt or (isinstance(exc, asyncio.IncompleteReadError) and exc.partial):
                    raise
                continue
            return await self._rest(head)
        raise ConnectionError("unreachable")

    async def _rest(self, head: bytes) -> tuple[int, dict, bytes]:
        assert self.reader is not None
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = await self._chunked()
        else:
            body = await self.reader.readexactly(int(headers.get("content-length") or 0))
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, body

    async def _chunked(self) -> bytes:
        assert self.reader is not None
        parts: list[bytes] = []
        while True:
            size = int((await self.reader.readline()).split(b";")[0].strip(), 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)


OUTCOME = re.compile(rb'"outcome"\s*:\s*"([a-z_]+)"')
HANDLER_STATUS = re.compile(r'desc="[^"]*? ([a-z_]+)"')


SAMPLES: dict[str, str] = {}   # the first answer of each kind counted as an error, to print


def classify(role: str, status: int, headers: dict, body: bytes) -> str:
    verdict = _classify(role, status, headers, body)
    if verdict != "ok" and verdict not in SAMPLES:
        timing = headers.get("server-timing", "")
        SAMPLES[verdict] = (body[:300].decode(errors="replace") + (f" [Server-Timing: {timing[:200]}]" if timing else ""))
    return verdict


def _classify(role: str, status: int, headers: dict, body: bytes) -> str:
    """"ok", or what was wrong: the HTTP status, a handler that did not run as it should (its status in
    Server-Timing: the hub fails open, so a refused fetch still answers 200), or another outcome."""
    if status != 200:
        return str(status)
    statuses = HANDLER_STATUS.findall(headers.get("server-timing", ""))
    bad = [s for s in statuses if s not in ("ran", "cancelled")]   # a veto is the outcome's to judge
    if bad:
        return f"handler {bad[0]}"
    found = OUTCOME.search(body)
    outcome = found.group(1).decode() if found else "none"
    return "ok" if outcome == EXPECTED[role] else f"outcome {outcome}"


async def _caller(conn: Connection, role: str, out: list, spec: dict, t0: float) -> None:
    """Calls in a closed loop until the phase ends (or its budget of calls is spent); after a 503 it waits
    the answer's Retry-After before its next call, as a well-behaved platform does (a caller that resent
    at once would measure how fast the hub refuses, not how much it serves). Timestamps are
    time.monotonic(): uvloop's loop.time() counts whole milliseconds."""
    clock = time.monotonic
    end, timeout, budget = t0 + spec["seconds"], spec["timeout"], spec["calls_per_caller"]
    made = 0
    while made < budget and clock() < end:
        made += 1
        started = clock()
        rest = 0.0
        try:
            answer = await asyncio.wait_for(conn.call(), timeout)
            status = classify(role, *answer)
            if answer[0] == 503:   # a shed call: a client that honours Retry-After, as the platform's does
                rest = float(answer[1].get("retry-after", 1))
        except TimeoutError:
            conn.close()   # its answer, if any, would come on this connection: a new one for the next call
            status = "timeout"
        except asyncio.CancelledError:
            conn.close()
            out.append((role, started - t0, clock() - t0, "unanswered"))
            raise
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
            conn.close()
            status = f"conn {type(exc).__name__}"
        out.append((role, started - t0, clock() - t0, status))
        if rest:
            await asyncio.sleep(min(rest, max(0.0, end - clock())))


async def _client(spec: dict) -> dict:
    conns = []
    for group in spec["groups"]:
        request = (f"POST {PATH} HTTP/1.1\r\nHost: {HOST}:{spec['port']}\r\nAuthorization: Bearer {group['key']}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n{BODY}").encode()
        conns += [(group["role"], Connection(spec["port"], request)) for _ in range(group["callers"])]
    opened = await asyncio.gather(*(c.open() for _, c in conns), return_exceptions=True)
    refused = sum(1 for r in opened if isinstance(r, BaseException))
    for (_, c), r in zip(conns, opened, strict=True):
        if isinstance(r, BaseException):
            c.close()   # tried again at its first call
    # time.monotonic is CLOCK_MONOTONIC, the same in every process: all clients start together
    t0 = max(spec["start_at"], time.monotonic())
    await asyncio.sleep(t0 - time.monotonic())
    out: list = []
    tasks = [asyncio.ensure_future(_caller(c, role, out, spec, t0)) for role, c in conns]
    # Each call ends within its timeout, so every caller ends by then; the wall-clock limit is kept anyway.
    await asyncio.wait(tasks, timeout=max(0.0, t0 + spec["seconds"] + spec["timeout"] + 5 - time.monotonic()))
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for _, c in conns:
        c.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"calls": out, "cpu": usage.ru_utime + usage.ru_stime, "refused": refused, "samples": SAMPLES}


def client_main() -> None:
    spec = json.load(sys.stdin)
    _new_loop()
    print(json.dumps(asyncio.run(_client(spec))))


# ================================================================ a stand-in hub (--stand-in)

async def _stand_in(port: int, delay_port: int) -> None:
    """Answers execute calls as a hub whose every call costs nothing but its host call would: the
    I/O tenants' calls wait on one request to the delay server each (a new connection, as host.fetch
    opens today), the quiet ones on nothing. What the bench measures against it is the bench's own
    ceiling: the clients and the delay server, not the hub."""
    async def host_call(blocked: bool) -> bool:
        r, w = await asyncio.open_connection(HOST, delay_port)
        w.write(f"GET /{'blocked' if blocked else 'check'} HTTP/1.1\r\nHost: {HOST}:{delay_port}\r\n"
                "Connection: close\r\n\r\n".encode())
        answer = await r.read()
        w.close()
        return b'"ok": true' in answer

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
                await reader.readexactly(int(headers.get("content-length") or 0))
                key = headers.get("authorization", "")
                status = "ran"
                if "/execute" in lines[0] and not key.endswith(tuple(f"quiet-{i}" for i in range(10))):
                    status = "ran" if await host_call(key.endswith("io-blocked")) else "cancelled"
                body = json.dumps({"outcome": "unchanged" if status == "ran" else "cancelled"}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                             b'Server-Timing: chain;dur=0, h0;dur=0;desc="check %s"\r\n\r\n%s'
                             % (len(body), status.encode(), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return
        finally:
            writer.close()

    listener = await asyncio.start_server(handle, HOST, port, backlog=4096)
    await listener.serve_forever()


# ================================================================ setup (its own Django process)

def setup_main() -> None:
    """Read {account: [[plugin name, source, grant]]} on stdin; print {account: raw key} as JSON."""
    sys.path.insert(0, str(ROOT))
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
        for start in range(0, len(names), 200):
            with transaction.atomic():
                for name in names[start:start + 200]:
                    keys[name] = accounts.create_api_key(name, key_name="bench")
                    account = Account.objects.get(name=name)
                    for plugin_name, source, grant in plan[name]:
                        plugins.install_plugin(account, name=plugin_name, source=source, language="javascript",
                                               grant=grant)
    finally:
        _stop_engines()
    print(json.dumps(keys))


# ================================================================ the orchestrator

class Hub:
    """gunicorn from the project directory (gunicorn.conf.py, its engine tier), restartable."""

    def __init__(self, args, env: dict, workdir: Path, delay_port: int):
        self.args, self.env, self.workdir, self.delay_port = args, env, workdir, delay_port
        self.port = free_port()
        self.server: subprocess.Popen | None = None
        # With --stand-in the quiet tenants call a stand-in process of their own: one asyncio loop
        # serving 1,000 callers delays their answers itself, and what is measured beside the load is
        # then the bench's own interference (its clients and delay server), not that loop.
        self.quiet_port = free_port() if args.stand_in else self.port
        self.quiet_server: subprocess.Popen | None = None
        self.log = open(workdir / "server.log", "ab")

    def command(self) -> list[str]:
        if self.args.stand_in:
            return [sys.executable, str(Path(__file__).resolve()), "--stand-in-hub", str(self.port), str(self.delay_port)]
        cmd = [sys.executable, "-m", "gunicorn", "-b", f"{HOST}:{self.port}", "-w", str(self.args.workers),
               "--log-level", "warning"]
        if self.args.worker_class:
            cmd += ["--worker-class", self.args.worker_class]
        app = resolve_app(self.args.app, self.args.worker_class, self.env)
        return cmd + ([app] if app else [])

    def start(self, key: str) -> None:
        self.server = subprocess.Popen(self.command(), cwd=ROOT, env=self.env, stdout=self.log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        wait_ready(self.server, self.port, key)
        if self.args.stand_in:   # the quiet tenants' own stand-in: see quiet_port
            self.quiet_server = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--stand-in-hub", str(self.quiet_port),
                 str(self.delay_port)], stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
            wait_ready(self.quiet_server, self.quiet_port, key)

    def stop(self) -> None:
        for server in (self.server, self.quiet_server):
            if server is not None:
                stop_server(server)
        self.server = self.quiet_server = None

    def close(self) -> None:
        self.stop()
        self.log.close()


def resolve_app(app: str, worker_class: str | None, env: dict) -> str | None:
    """The app gunicorn serves. "auto": none when gunicorn.conf.py names it (`wsgi_app`), the ASGI
    application under an ASGI worker class (from --worker-class, GUNICORN_CMD_ARGS or the config),
    else the WSGI one."""
    if app != "auto":
        return app or None
    conf = (ROOT / "gunicorn.conf.py").read_text()
    if re.search(r"^wsgi_app\s*=", conf, re.M):
        return None
    found = re.search(r"(?:--worker-class|-k)[ =](\S+)", env.get("GUNICORN_CMD_ARGS", ""))
    in_conf = re.search(r"^worker_class\s*=\s*['\"]([^'\"]+)", conf, re.M)
    chosen = worker_class or (found and found.group(1)) or (in_conf and in_conf.group(1)) or ""
    asgi = "uvicorn" in chosen.lower() or "asgi" in chosen.lower()
    return "middleware_hub.asgi:application" if asgi else "middleware_hub.wsgi"


class Delays:
    """The delay server's process and its control calls."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--delay-server"],
                                     stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def _get(self, path: str) -> dict:
        with urllib.request.urlopen(f"http://{HOST}:{self.port}{path}", timeout=10) as answer:
            return json.loads(answer.read())

    def set_delay(self, seconds: float) -> None:
        self._get(f"/__delay/{seconds * 1000:g}")

    def stats(self, reset: bool = False) -> dict:
        return self._get("/__stats?reset=1" if reset else "/__stats")

    def cpu_seconds(self) -> float:
        fields = _stat(self.proc.pid) or []
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if len(fields) > 12 else 0.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def run_clients(hub: Hub, specs: list[dict], seconds: float) -> tuple[list[dict], Memory]:
    """Runs one client process per spec, all starting at the same instant; samples the hub's summed
    RSS while they run. Returns their results and the memory seen (its highest sum, with its parts).
    A client writes its calls to a file (a pipe would fill while it is not read); one still running
    well past its own limit is killed."""
    callers = sum(g["callers"] for spec in specs for g in spec["groups"])
    start_at = time.monotonic() + 1.5 + callers / 1000   # time to start Python and open every connection
    procs, outputs = [], []
    try:
        for spec in specs:
            spec = dict({"port": hub.port}, **spec, start_at=start_at, seconds=seconds, timeout=hub.args.timeout)
            out = tempfile.TemporaryFile()
            p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--client"], stdin=subprocess.PIPE,
                                 stdout=out)
            assert p.stdin is not None
            p.stdin.write(json.dumps(spec).encode())
            p.stdin.close()
            procs.append(p)
            outputs.append(out)
        memory = Memory(hub)
        memory.watch(procs, deadline=start_at + seconds + hub.args.timeout + 30)
        results = []
        for p, out in zip(procs, outputs, strict=True):
            p.wait()
            out.seek(0)
            text = out.read()
            if p.returncode != 0 or not text.strip():
                raise SystemExit(f"a client process failed ({p.returncode})")
            results.append(json.loads(text))
        return results, memory
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for out in outputs:
            out.close()


class Memory:
    """The hub's process tree (gunicorn master, workers, supervisor, engines): summed VmRSS, and the CPU
    its processes spent between the first sample and the last (the cost of a call, whatever admission
    lets through: the rates alone move with the machine's noise)."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, hub: Hub):
        assert hub.server is not None
        self.master = hub.server.pid
        self.peak = 0
        self.parts: dict = {}
        self._ticks: dict[int, tuple[str, int, int]] = {}   # pid -> (part, ticks at first sight, ticks now)

    def sample(self, pids: list[int]) -> None:
        parts = {"web": 0, "engines": 0}
        for pid in pids:
            part = "engines" if "plugins_app.runtime" in cmdline(pid) else "web"
            parts[part] += rss_kib(pid)
            fields = _stat(pid)
            if fields:
                ticks = int(fields[11]) + int(fields[12])   # utime + stime
                first = self._ticks.get(pid, (part, ticks, ticks))[1]
                self._ticks[pid] = (part, first, ticks)
        total = parts["web"] + parts["engines"]
        if total > self.peak:
            self.peak, self.parts = total, parts

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds spent by the web processes and the engines while watched."""
        spent = {"web": 0.0, "engines": 0.0}
        for part, first, now in self._ticks.values():
            spent[part] += (now - first) / self.TICK
        return spent

    def watch(self, procs: list[subprocess.Popen], deadline: float) -> None:
        pids: list[int] = []
        n = 0
        while any(p.poll() is None for p in procs):
            if time.monotonic() > deadline:
                raise SystemExit("a client process ran past its wall-clock limit")
            if n % 10 == 0:   # the tree rescanned every 5 s: an engine may be started again
                pids = [pid for pid, _ in process_tree(self.master)]
            self.sample(pids)
            n += 1
            time.sleep(0.5)
        self.sample([pid for pid, _ in process_tree(self.master)])


def to_calls(results: list[dict], role: str) -> list[Call]:
    return [Call(start, done, status) for r in results for (who, start, done, status) in r["calls"] if who == role]


def groups(keys: dict, names: list[str], role: str, per_account: int) -> list[dict]:
    return [{"role": role, "key": keys[n], "callers": per_account} for n in names]


class Bench:
    def __init__(self, args, hub: Hub, delays: Delays, keys: dict):
        self.args, self.hub, self.delays, self.keys = args, hub, delays, keys
        self.quiet_names = [f"quiet-{i}" for i in range(args.quiet)]
        self.client_cpu: list[str] = []

    def io_names(self, n: int) -> list[str]:
        return [f"io-{i:04d}" for i in range(n)]

    def warm(self, names: list[str]) -> None:
        """Each account's compartments loaded (one call each, no delay) before it is measured."""
        self.delays.set_delay(0)
        spec = {"groups": groups(self.keys, names, "io", 1), "calls_per_caller": 1}
        results, _ = run_clients(self.hub, [spec], 30)
        bad = [c for c in to_calls(results, "io") if not c.ok]
        if bad:
            print(f"  warm-up: {len(bad)} of {len(names)} first calls failed: {bad[0].status}", flush=True)

    def phase(self, name: str, io: tuple[list[str], int] | None, quiet: bool, delay_s: float,
              seconds: float) -> tuple[Figures | None, Figures | None, list[Call]]:
        specs = []
        if io is not None:
            specs.append({"groups": groups(self.keys, io[0], "io", io[1]), "calls_per_caller": 10**6})
        if quiet and self.quiet_names:
            specs.append({"groups": groups(self.keys, self.quiet_names, "quiet", 1), "calls_per_caller": 10**6,
                          "port": self.hub.quiet_port})
        self.delays.set_delay(delay_s)
        self.delays.stats(reset=True)
        server_cpu = self.delays.cpu_seconds()
        results, memory = run_clients(self.hub, specs, seconds)
        stats = self.delays.stats()
        server_cpu = self.delays.cpu_seconds() - server_cpu
        cpu = sum(r["cpu"] for r in results)
        self.client_cpu.append(f"{name}: clients {cpu:.1f} s, delay server {server_cpu:.1f} s over {seconds:g} s "
                               f"({(cpu + server_cpu) / seconds:.0%} of a core)")
        load = quiet_fig = None
        calls, quiet_calls = to_calls(results, "io"), to_calls(results, "quiet")
        if io is not None:
            load = summarize(name, calls, len(io[0]) * io[1], delay_s, seconds)
            load.rss_peak_kib, load.rss_parts = memory.peak, memory.parts
        if quiet and self.quiet_names:
            quiet_fig = summarize("quiet alone" if io is None else f"quiet beside {name}", quiet_calls,
                                  len(self.quiet_names), 0.0, seconds)
            quiet_fig.rss_peak_kib, quiet_fig.rss_parts = memory.peak, memory.parts
        print_phase(load, quiet_fig, stats, cpu / seconds, server_cpu / seconds)
        answered = sum(c.ok for c in calls + quiet_calls)
        if answered:
            hub_cpu = memory.cpu_seconds()
            per_call = {k: v * 1000 / answered for k, v in hub_cpu.items()}
            print(f"    hub CPU per answered call: {sum(per_call.values()):.1f} ms (web {per_call['web']:.1f}, "
                  f"engines {per_call['engines']:.1f}); {sum(hub_cpu.values()) / seconds:.0%} of a core", flush=True)
        if refused := sum(r["refused"] for r in results):
            print(f"    {refused} connection(s) could not be opened before the start (opened again at their first call)")
        for status, body in sorted({k: v for r in results for k, v in r["samples"].items()}.items()):
            print(f"    an answer counted as {status}: {body}", flush=True)
        self.restart_if_backlogged(calls + quiet_calls)
        return load, quiet_fig, calls if io is not None else quiet_calls

    def restart_if_backlogged(self, calls: list[Call]) -> None:
        """A call given up on may still be queued in the hub: the next phase must not inherit it."""
        abandoned = sum(1 for c in calls if c.status in ("timeout", "unanswered"))
        if abandoned:
            print(f"  {abandoned} call(s) given up on: restarting the hub so the next phase starts clean", flush=True)
            self.hub.stop()
            self.hub.start(self.keys["quiet-0"] if self.quiet_names else self.keys["io-0000"])


def print_phase(load: Figures | None, quiet: Figures | None, stats: dict, client_cores: float,
                server_cores: float) -> None:
    for fig in (load, quiet):
        if fig is None:
            continue
        errs = ", ".join(f"{k}: {v}" for k, v in sorted(fig.errors.items())) or "none"
        print(f"  {fig.name}: {fig.started} calls, {fig.ok} ok, {num(fig.rate)} calls/s, p50 {num(fig.p50)} ms, "
              f"p99 {num(fig.p99)} ms, max {num(fig.max)} ms (answered calls); errors: {errs}", flush=True)
    fig = load or quiet
    parts = ", ".join(f"{k} {v / 1024:,.0f} MiB" for k, v in fig.rss_parts.items()) if fig else ""
    print(f"    hub RSS peak {fig.rss_peak_kib / 1024 if fig else 0:,.0f} MiB ({parts}); delay server: {stats['served']} host calls answered, "
          f"at most {stats['peak']} waiting at once; the bench's CPU: clients {client_cores:.0%}, delay server "
          f"{server_cores:.0%} of a core", flush=True)


def header(args, hub: Hub) -> None:
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    tuned = {k: v for k, v in os.environ.items()
             if k.startswith(("HOOK_", "HUB_", "GUNICORN", "WEB_CONCURRENCY", "DJANGO_"))}
    print(f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}  commit: {commit}  "
          f"machine: nproc {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.2f}, "
          f"python {sys.version.split()[0]}")
    if args.stand_in:
        print("server: NOT the hub: the stand-in (--stand-in), whose calls cost only their host call; the figures "
              "are the bench's own ceiling", flush=True)
        return
    print(f"server: {shlex.join(hub.command()[1:])} (gunicorn.conf.py from {ROOT}), DJANGO_DEBUG=0, SQLite, "
          f"HUB_FETCH_ALLOW_PRIVATE=1; environment: {tuned or 'nothing hub-specific'}", flush=True)


def plan_for(args, fetch_url: str, blocked_url: str, io_accounts: int) -> dict:
    plan: dict = {f"io-{i:04d}": [["check", IO_SOURCE % fetch_url, ["host:fetch"]]] for i in range(io_accounts)}
    plan["io-blocked"] = [["check", IO_SOURCE % blocked_url, ["host:fetch"]]]
    plan.update({f"quiet-{i}": [["trim", QUIET_SOURCE, []]] for i in range(args.quiet)})
    return plan


def setup_accounts(env: dict, plan: dict) -> dict:
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--setup"], cwd=ROOT,
                          env=dict(env, DJANGO_SETTINGS_MODULE=env.get("DJANGO_SETTINGS_MODULE", "middleware_hub.settings")),
                          input=json.dumps(plan), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"setup failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def sanity(bench: Bench) -> None:
    """The chain really fetches: an account whose server says no is vetoed, and the server saw both calls."""
    before = bench.delays.stats()["served"]
    for name, role in (("io-0000", "io"), ("io-blocked", "blocked")):
        spec = {"groups": [{"role": role, "key": bench.keys[name], "callers": 1}], "calls_per_caller": 1}
        results, _ = run_clients(bench.hub, [spec], 30)
        calls = to_calls(results, role)
        if not calls or not calls[0].ok:
            raise SystemExit(f"sanity check: {name}'s call answered {calls[0].status if calls else 'nothing'}")
    served = bench.delays.stats()["served"] - before
    if served != 2:
        raise SystemExit(f"sanity check: the delay server saw {served} host calls, not 2")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", default=",".join(SCENARIOS),
                   help=f"comma-separated subset of {','.join(SCENARIOS)} (default all; the CPU-bound reference "
                        "and the quiet tenants alone always run)")
    p.add_argument("--seconds", type=float, default=None,
                   help="every phase's length (default: " + ", ".join(f"{k} {s.seconds:g} s" for k, s in SCENARIOS.items())
                        + ", the references 6 s)")
    p.add_argument("--quiet", type=int, default=4, help="quiet accounts, one caller each (default 4; 0: none)")
    p.add_argument("--c-accounts", type=int, default=250, help="accounts the 1,000 callers of (c) spread over (default 250)")
    p.add_argument("--cpu-callers", type=int, default=32,
                   help="accounts (one caller each) of the CPU-bound reference, the I/O chain with no delay (default 32)")
    p.add_argument("--timeout", type=float, default=30, help="a call's timeout on the client (default 30 s)")
    p.add_argument("--workers", type=int, default=2, help="gunicorn -w (default 2)")
    p.add_argument("--worker-class", default=None, help="gunicorn --worker-class (default: gunicorn.conf.py's)")
    p.add_argument("--app", default="auto",
                   help="the app gunicorn serves (default: from the worker class; '': none, gunicorn.conf.py's wsgi_app)")
    p.add_argument("--stand-in", action="store_true",
                   help="measure the bench's own ceiling: an asyncio stand-in whose calls cost only their host call "
                        "answers instead of the hub (no Django, no engines)")
    args = p.parse_args()
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = set(args.scenarios) - set(SCENARIOS)
    if unknown:
        p.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    return args


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < min(hard, 16384):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 16384), hard))


def scenario_of(args, name: str) -> Scenario:
    s = SCENARIOS[name]
    if name == "c":
        s = Scenario(f"(c) 1,000 callers: {args.c_accounts} accounts x {1000 // args.c_accounts}", args.c_accounts,
                     1000 // args.c_accounts, s.delay_s, s.seconds)
    return Scenario(s.title, s.accounts, s.per_account, s.delay_s, args.seconds or s.seconds)


def run(args, workdir: Path) -> list[tuple[str, ...]]:
    scenarios = {n: scenario_of(args, n) for n in args.scenarios}
    io_accounts = max([args.cpu_callers, *(s.accounts for s in scenarios.values())])
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{workdir / 'io.sqlite3'}", DJANGO_DEBUG="0",
               HUB_FETCH_ALLOW_PRIVATE="1")
    delays = Delays()
    hub = Hub(args, env, workdir, delays.port)
    try:
        header(args, hub)
        started = time.perf_counter()
        plan = plan_for(args, f"http://{HOST}:{delays.port}/check", f"http://{HOST}:{delays.port}/blocked", io_accounts)
        if args.stand_in:
            keys = {name: name for name in plan}
        else:
            manage(env, "migrate", "--noinput")
            keys = setup_accounts(env, plan)
        print(f"setup: {len(plan)} accounts in {time.perf_counter() - started:.1f} s; delay server on port "
              f"{delays.port}", flush=True)
        hub.start(keys["io-0000"])
        bench = Bench(args, hub, delays, keys)
        sanity(bench)
        return measure(args, bench, scenarios)
    finally:
        hub.close()
        delays.stop()
        _log_tail(workdir / "server.log")


def measure(args, bench: Bench, scenarios: dict[str, Scenario]) -> list[tuple[str, ...]]:
    ref_seconds = args.seconds or 6
    cpu_names = bench.io_names(args.cpu_callers)
    bench.warm(cpu_names)
    print(f"reference: the I/O chain with no delay, {args.cpu_callers} accounts x 1 caller", flush=True)
    cpu, _, _ = bench.phase("CPU-bound reference", (cpu_names, 1), False, 0.0, ref_seconds)
    assert cpu is not None
    alone: list[tuple[Figures, list[Call]]] = []

    def quiet_alone(when: str) -> None:
        if bench.quiet_names:
            bench.warm(bench.quiet_names)
            print(f"reference: {len(bench.quiet_names)} quiet accounts x 1 caller, alone ({when})", flush=True)
            _, fig, calls = bench.phase(f"quiet alone, {when}", None, True, 0.0, ref_seconds)
            assert fig is not None
            alone.append((fig, calls))

    quiet_alone("before the loads")
    measured = []
    for name, s in scenarios.items():
        names = bench.io_names(s.accounts)
        bench.warm(names)
        print(f"{name}: {s.title}, {s.delay_s * 1000:g} ms host call, {s.seconds:g} s; ideal "
              f"{ideal_rate(s.callers, s.delay_s, cpu.rate):,.1f} calls/s", flush=True)
        load, quiet, _ = bench.phase(name, (names, s.per_account), True, s.delay_s, s.seconds)
        assert load is not None
        load.name = f"{name}: {s.title}"
        measured.append((name, s, load, quiet))
    if measured:
        quiet_alone("after the loads")
    print("\nthe bench's own CPU (client processes and delay server, from the clients' start to their end): "
          + "; ".join(bench.client_cpu))
    rows = [row(cpu, cpu.rate, None, None, None)]
    reference = pooled("quiet alone (both runs)", alone) if alone else None
    if reference is not None:
        rows += [quiet_alone_row(fig) for fig, _ in alone]
        if len(alone) > 1:
            rows.append(quiet_alone_row(reference))
    for name, s, load, quiet in measured:
        rows.append(row(load, ideal_rate(s.callers, s.delay_s, cpu.rate), TARGETS.get(name), quiet, reference))
    return rows


def _log_tail(path: Path, lines: int = 6) -> None:
    text = path.read_text(errors="replace").splitlines() if path.exists() else []
    if text:
        print(f"server log: {len(text)} lines; last {min(lines, len(text))}:")
        for line in text[-lines:]:
            print(f"  | {line[:200]}")


def _on_term(signum, frame):
    raise KeyboardInterrupt


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _on_term)
    raise_fd_limit()
    workdir = Path(tempfile.mkdtemp(prefix="hub-io-"))
    try:
        rows = run(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    print(table(rows))
    print("\nideal: callers / host-call delay, or the CPU-bound reference's calls/s if lower; quiet figures: "
          "(x their run alone); targets (issue 38): a, b >= 0.75x ideal (b: 0 errors); c: all answered, 0 errors, "
          "hub RSS <= 1.5 GiB; beside a, b, c the quiet tenants' p99 <= 3x, max <= 250 ms, calls/s >= 0.80x")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--delay-server"]:
        _new_loop()
        asyncio.run(_serve_delays())
    elif sys.argv[1:2] == ["--client"]:
        client_main()
    elif sys.argv[1:2] == ["--stand-in-hub"]:
        _new_loop()
        asyncio.run(_stand_in(int(sys.argv[2]), int(sys.argv[3])))
    elif sys.argv[1:2] == ["--setup"]:
        setup_main()
    else:
        try:
            sys.exit(main())
        except KeyboardInterrupt:
            print("interrupted: the hub, the delay server and the clients were stopped", file=sys.stderr)
            sys.exit(130)

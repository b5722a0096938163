"""A whole hub on this machine for the fault suite: gunicorn (its master, the engine supervisor and its
engines, two web workers), redis-server, a Celery worker and beat (or beats); a small steady load of execute calls;
and the figures a fault cost (errors, fail-open answers, recovery seconds, rows lost)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.celery_services import _pings, _require_redis_server, free_port, wait_until
from tests.plugins_app.serving import ROOT, Served

CELERY = str(Path(sys.executable).with_name("celery"))
INBOUND = {"sessionId": "10", "channelId": None, "text": "rm -rf /", "mediaIds": []}
VETO = "globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('no rm');"
SHADOW = "globalThis.middleware.userMessageInbound = async (c) => c.text.toUpperCase();"
EXECUTE = "/api/v1/hooks/userMessageInbound/execute"
RECOVERY_BOUND_SECONDS = 30   # generous: a bound on healing, not a performance figure


class Redis:
    """redis-server on one port, which can be killed and started again on that port."""

    def __init__(self, workdir: Path):
        self.binary, self.port, self.workdir = _require_redis_server(), free_port(), workdir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        # An append-only file synced at every write, as a production broker should run: the tasks it
        # held are still queued after it is killed and started again.
        self.proc = subprocess.Popen([self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: _pings(self.url), 30, "redis-server to answer PING")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class Celery:
    """`celery worker` (no -Q: every queue) and `celery beat` against the hub's database and Redis."""

    def __init__(self, env: dict, workdir: Path):
        self.env, self.workdir = env, workdir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, kind: str, name: str | None = None) -> None:
        """Starts a `kind` ("worker" or "beat") process, known as `name` (default: `kind`; a second beat
        needs a name of its own: its pid file and log are named after it)."""
        name = name or kind
        args = (["worker", "-l", "info", "--concurrency", "1", "-n", f"faults-{os.getpid()}@%h", "--without-gossip",
                 "--without-mingle", "--without-heartbeat"] if kind == "worker"
                else ["beat", "-l", "info", "--pidfile", str(self.workdir / f"{name}.pid")])
        log = self.log(name)
        with open(log, "ab") as out:
            proc = subprocess.Popen([CELERY, "-A", "middleware_hub", *args], cwd=ROOT, env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        ready = "ready." if kind == "worker" else "beat: Starting..."
        wait_until(lambda: ready in log.read_text(errors="replace") or proc.poll() is not None, 60, f"{name} to start")
        assert proc.poll() is None, f"{name} exited:\n{log.read_text(errors='replace')[-3000:]}"

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def revive(self, kind: str) -> bool:
        """Starts `kind` again if it exited, as a service manager (systemd's Restart=always) would;
        whether it had to."""
        if self.procs[kind].poll() is None:
            return False
        self.procs.pop(kind)
        self.start(kind)
        return True

    def kill(self, kind: str) -> None:
        proc = self.procs.pop(kind)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)   # the worker's pool and engines too
            proc.wait(10)

    def stop(self) -> None:
        for kind in list(self.procs):
            self.kill(kind)


@dataclass
class Answer:
    at: float
    status: int   # 0: no HTTP answer at all (the connection failed)
    json: bool
    retry_after: str | None
    outcome: str | None   # cancelled | unchanged | ...
    crashed: bool         # the trace says the engine died while it ran
    seconds: float        # from sending the call to its answer


@dataclass
class Load:
    """`threads` callers, each sending execute calls one after another, `pause` seconds apart."""

    hub: Hub
    threads: int = 6
    pause: float = 0.02
    answers: list[Answer] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Load:
        for _ in range(self.threads):
            thread = threading.Thread(target=self._run, daemon=True)
            thread.start()
            self._workers.append(thread)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._workers:
            thread.join(60)

    def _run(self) -> None:
        conn = None
        while not self._stop.is_set():
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.hub.served.port, timeout=60)
            sent = time.monotonic()
            try:
                conn.request("POST", EXECUTE, json.dumps({"context": INBOUND}), self.hub.headers)
                response = conn.getresponse()
                body = response.read()
                status, ctype, retry = response.status, response.getheader("Content-Type") or "", \
                    response.getheader("Retry-After")
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = None
                self.answers.append(Answer(time.monotonic(), 0, False, None, None, False, time.monotonic() - sent))
                time.sleep(0.05)
                continue
            data = json.loads(body) if ctype.startswith("application/json") else None
            trace = (data or {}).get("trace") or []
            self.answers.append(Answer(time.monotonic(), status, data is not None, retry, (data or {}).get("outcome"),
                                       any(t.get("status") == "error" for t in trace), time.monotonic() - sent))
            time.sleep(self.pause)
        if conn is not None:
            conn.close()

    def since(self, moment: float) -> list[Answer]:
        return [a for a in self.answers if a.at >= moment]

    def wait_for_answers(self, n: int, after: float) -> None:
        wait_until(lambda: len(self.since(after)) >= n, 60, f"{n} answers")

    def wait_for_vetoes(self, n: int, after: float) -> None:
        """Until `n` calls were answered vetoed after `after` (the hub works again)."""
        wait_until(lambda: sum(a.outcome == "cancelled" for a in self.since(after)) >= n, 60, f"{n} vetoed answers")


class Hub:
    """Every process of one machine's hub, and what the tests ask of it."""

    def __init__(self, workdir: Path, database_url: str | None = None, with_celery: bool = True,
                 env: dict[str, str] | None = None):
        self.redis = Redis(workdir)
        self.redis.start()
        self.celery = None
        self.served = Served(workers=2, log=workdir / "gunicorn.log", CELERY_BROKER_URL=self.redis.url, HUB_VAR_DIR=str(workdir / "var"),
                             HUB_WORKER_THREADS="8", HUB_METRICS_TOKEN="faults-token", HUB_NOTIFY_SWEEP_SECONDS="1",
                             # Load shedding off: a call held while an engine is replaced would otherwise be
                             # answered 503 `overloaded` after 1 s, and these figures are each fault's own cost.
                             # Shedding has its tests (tests/plugins_app/engine/test_shedding.py) and bench/overload.py.
                             HUB_EXECUTE_QUEUE_DEADLINE_MS="0")
        # Two shared engines and no lane: "both engines" are every engine of the tier.
        self.served.env.update(CELERY_TASK_ALWAYS_EAGER="0", HUB_ENGINE_PROCESSES="2", HUB_LANE_PROCESSES="0")
        if database_url:
            self.served.env["DATABASE_URL"] = database_url
        self.served.env.update(env or {})
        self.served.start()
        self.key = self.served.manage("create_api_key", "faults").strip().splitlines()[-1]
        self.headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        self.veto = self.install("veto", VETO)
        if not with_celery:
            return
        self.shadow = self.install("shadow", SHADOW)
        status, _, body = self.served.request("PATCH", f"/api/v1/plugins/{self.shadow}", {"mode": "shadow"},
                                              self.headers)
        assert status == 200, body
        # A shadow runs at its place in the chain, on the input there: ahead of the veto, so every
        # answered call runs it (after the veto, a cancelled chain never reaches it).
        status, _, body = self.served.request("PUT", "/api/v1/chains/userMessageInbound",
                                              {"installationId": str(self.shadow), "position": 0}, self.headers)
        assert status == 200, body
        self.celery = self.celery_processes(workdir)
        self.celery.start("worker")
        self.celery.start("beat")

    def celery_processes(self, workdir: Path) -> Celery:
        """Celery's worker and beats for this hub (its database, its Redis), none started yet."""
        return Celery(dict(self.served.env, DATABASE_CONN_MAX_AGE="0", PYTHONPATH=str(ROOT)), workdir)

    def install(self, name: str, source: str) -> int:
        status, _, body = self.served.request("POST", "/api/v1/plugins", {
            "name": name, "source": source, "language": "javascript"}, self.headers)
        assert status == 201, body
        return json.loads(body)["id"]

    def log_lines(self) -> int:
        """Lines gunicorn's processes (the web workers, the engines) have written so far."""
        with open(self.served.log, "rb") as log:
            return sum(1 for _ in log)

    def get(self, path: str) -> dict:
        status, _, body = self.served.request("GET", path, headers=self.headers)
        assert status == 200, body
        return json.loads(body)

    def cancel_rows(self) -> int:
        return self.get("/api/v1/cancellations?pageSize=1")["count"]

    def shadow_calls(self) -> int:
        return self.get(f"/api/v1/plugins/{self.shadow}/shadow")["counts"]["calls"]

    def metric(self, name: str, **labels: str) -> float:
        status, _, body = self.served.request("GET", "/metrics", headers={"Authorization": "Bearer faults-token"})
        assert status == 200
        total = 0.0
        for line in body.decode().splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    # -- the processes -------------------------------------------------------------------------------
    def supervisor_pid(self) -> int:
        return _children(self.served.process.pid, b"plugins_app.runtime.engine.supervisor")[0]

    def engine_pids(self) -> list[int]:
        """The shared engines (each has a seat on the board): not the lane, nor the engine that only compiles."""
        return [pid for pid in _children(self.supervisor_pid(), b"plugins_app.runtime.engine.process")
                if b"\x00seat=" in Path(f"/proc/{pid}/cmdline").read_bytes()]

    def stop(self) -> None:
        if self.celery is not None:
            self.celery.stop()
        self.served.stop()
        self.redis.kill()


def _children(parent: int, marker: bytes) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if ppid == parent and marker in cmdline.read():
                    found.append(int(entry))
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
    return found


def recovery_seconds(answers: list[Answer], fault_at: float) -> float | None:
    """From the fault to the first vetoed answer after the last other one (None: it never recovered).
    Where no answer was bad, the first vetoed answer after the fault: small, and "none needed"."""
    after = [a for a in answers if a.at >= fault_at]
    bad = [i for i, a in enumerate(after) if a.outcome != "cancelled"]
    good = after[bad[-1] + 1:] if bad else after
    first = next((a for a in good if a.outcome == "cancelled"), None)
    return None if first is None else round(first.at - fault_at, 2)


FIGURES: list[dict] = []   # one row per scenario run, printed by `make chaos`


def figures(scenario: str, answers: list[Answer], fault_at: float, **extra) -> dict:
    row = {"scenario": scenario, "answers": len(answers),
           "errors": sum(1 for a in answers if a.status not in (200, 503) or not a.json),
           "503": sum(1 for a in answers if a.status == 503),
           "fail-open": sum(1 for a in answers if a.status == 200 and a.outcome != "cancelled"),
           "recovery s": recovery_seconds(answers, fault_at),
           "slowest s": round(max((a.seconds for a in answers if a.at >= fault_at), default=0.0), 2), **extra}
    FIGURES.append(row)
    return row

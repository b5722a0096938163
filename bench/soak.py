"""Soak (issue 29): a whole hub (gunicorn with its engine tier, redis-server, a Celery worker and beat)
under a steady low rate of execute calls for a while; every process's RSS is sampled and its growth
reported per process as a slope (MiB per minute), over the whole run and over its second half (does it
level off?). `make soak SOAK_ARGS="--minutes 60"`; the default is short."""

from __future__ import annotations

import argparse
import http.client
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATH = "/api/v1/hooks/userMessageInbound/execute"
BODY = json.dumps({"context": {"sessionId": "1", "channelId": None, "text": "hello 4111 1111 1111 1111",
                               "mediaIds": []}})
HOOK = "globalThis.middleware.userMessageInbound = "
PLUGINS = {
    "mask cards": HOOK + "async (c) => c.text.replace(/\\d{4}( \\d{4}){3}/g, '[card]');",
    "tag": HOOK + "async (c) => c.text + ' [checked]';",
    "shadowed": HOOK + "async (c) => c.text.toUpperCase();",   # runs in the worker (shadow mode)
}
ROLES = (   # (role, what its command line holds); the first match names a process
    ("engine", b"plugins_app.runtime.engine.process"),
    ("supervisor", b"plugins_app.runtime.engine.supervisor"),
    ("beat", b"middleware_hub beat"),
    ("celery worker", b"middleware_hub worker"),
    ("gunicorn", b"gunicorn"),
    ("redis", b"redis-server"),
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, method: str, path: str, body=None, headers=None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body if body is None or isinstance(body, str) else json.dumps(body),
                     {"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def wait_until(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


class Hub:
    def __init__(self, workdir: Path, workers: int):
        self.workdir, self.port, self.procs = workdir, free_port(), []
        redis_port = free_port()
        self.env = dict(os.environ, DATABASE_URL=f"sqlite:///{workdir / 'hub.sqlite3'}", DJANGO_DEBUG="0",
                        DJANGO_SECRET_KEY="s" * 60, HUB_VAR_DIR=str(workdir / "var"),
                        CELERY_BROKER_URL=f"redis://127.0.0.1:{redis_port}/0", CELERY_TASK_ALWAYS_EAGER="0",
                        HUB_METRICS_TOKEN="soak", PYTHONPATH=str(ROOT))
        for name in ("HUB_ENGINE_DIR", "PROMETHEUS_MULTIPROC_DIR"):
            self.env.pop(name, None)
        self.start(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", str(workdir)], "redis")
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=self.env, check=True,
                       capture_output=True)
        self.key = subprocess.run([sys.executable, "manage.py", "create_api_key", "soak"], cwd=ROOT, env=self.env,
                                  check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        self.start([sys.executable, "-m", "gunicorn", "middleware_hub.wsgi", "-b", f"127.0.0.1:{self.port}",
                    "-w", str(workers), "--log-level", "warning"], "gunicorn")
        wait_until(self._healthy, 60, "gunicorn")
        celery = str(Path(sys.executable).with_name("celery"))
        self.start([celery, "-A", "middleware_hub", "worker", "-l", "warning", "--concurrency", "1"], "worker")
        self.start([celery, "-A", "middleware_hub", "beat", "-l", "warning", "--pidfile",
                    str(workdir / "beat.pid")], "beat")
        self.headers = {"Authorization": f"Bearer {self.key}"}
        for name, source in PLUGINS.items():
            status, body = request(self.port, "POST", "/api/v1/plugins",
                                   {"name": name, "source": source, "language": "javascript"}, self.headers)
            assert status == 201, body
            if name == "shadowed":
                pk = json.loads(body)["id"]
                request(self.port, "PATCH", f"/api/v1/plugins/{pk}", {"mode": "shadow"}, self.headers)

    def start(self, args: list[str], name: str) -> None:
        with open(self.workdir / f"{name}.log", "wb") as log:
            self.procs.append(subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True))

    def _healthy(self) -> bool:
        try:
            return request(self.port, "GET", "/healthz")[0] == 200
        except OSError:
            return False

    def pids(self) -> dict[int, str]:
        """Every process of the hub (the ones started here and their descendants), by role."""
        roots = {p.pid for p in self.procs}
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as stat:
                        parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        found: dict[int, str] = {}
        for pid in parents:
            ancestor = pid
            while ancestor not in roots and ancestor in parents and ancestor > 1:
                ancestor = parents[ancestor]
            if ancestor in roots:
                found[pid] = role(pid)
        return found

    def stop(self) -> None:
        for proc in reversed(self.procs):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def role(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ")
    except OSError:
        return "gone"
    return next((name for name, marker in ROLES if marker in cmdline), "other")


def rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares MiB per minute."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return 0.0 if var == 0 else sum((t - mean_t) * (v - mean_v) for t, v in points) / var * 60


def load(port: int, headers: dict, rate: float, stop: threading.Event, counts: dict) -> None:
    """Calls at `rate` per second from a few threads, each on its own schedule (not back to back)."""
    threads = max(1, min(8, int(rate // 5) or 1))
    interval = threads / rate
    lock = threading.Lock()

    def caller(offset: float) -> None:
        conn = None
        next_at = time.monotonic() + offset
        while not stop.is_set():
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at += interval
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.request("POST", PATH, BODY, {"Content-Type": "application/json", **headers})
                response = conn.getresponse()
                response.read()
                key = str(response.status)
            except (OSError, http.client.HTTPException):
                conn, key = None, "no answer"
            with lock:
                counts[key] = counts.get(key, 0) + 1

    workers = [threading.Thread(target=caller, args=(i * interval / threads,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--rate", type=float, default=20.0, help="execute calls per second")
    parser.add_argument("--sample-seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--warmup-minutes", type=float, help="left out of the slopes (default: a quarter of "
                        "the run, at most 5 minutes): startup growth is not a leak")
    parser.add_argument("--json", type=Path, help="write the samples and slopes here too")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="hub-soak-"))
    hub = Hub(workdir, args.workers)
    samples: dict[int, list[tuple[float, float]]] = {}
    roles: dict[int, str] = {}
    counts: dict[str, int] = {}
    stop = threading.Event()
    loader = threading.Thread(target=load, args=(hub.port, hub.headers, args.rate, stop, counts), daemon=True)
    started = time.monotonic()
    loader.start()
    try:
        end = started + args.minutes * 60
        while time.monotonic() < end:
            now = time.monotonic() - started
            for pid, name in hub.pids().items():
                value = rss_mib(pid)
                if value is not None:
                    roles[pid] = name
                    samples.setdefault(pid, []).append((now, value))
            time.sleep(args.sample_seconds)
    finally:
        stop.set()
        loader.join(60)
        hub.stop()
    report(samples, roles, counts, args, time.monotonic() - started)
    shutil.rmtree(workdir, ignore_errors=True)


def report(samples, roles, counts, args, seconds: float) -> None:
    warmup = 60 * (args.warmup_minutes if args.warmup_minutes is not None else min(5.0, args.minutes / 4))
    rows = []
    for pid, every in sorted(samples.items(), key=lambda item: (roles[item[0]], item[0])):
        points = [p for p in every if p[0] >= warmup]
        if len(points) < 3:
            continue   # a short-lived process (a private engine, a recycled worker): no trend to read
        half = [p for p in points if p[0] >= points[-1][0] / 2]
        rows.append({"role": roles[pid], "pid": pid, "minutes": round((points[-1][0] - points[0][0]) / 60, 1),
                     "first MiB": round(points[0][1], 1), "last MiB": round(points[-1][1], 1),
                     "MiB/min": round(slope(points), 3), "MiB/min, 2nd half": round(slope(half), 3)})
    print(f"soak: {seconds / 60:.1f} min at {args.rate:g} calls/s; answers {dict(sorted(counts.items()))}; "
          f"slopes from minute {warmup / 60:g} on")
    keys = ["role", "pid", "minutes", "first MiB", "last MiB", "MiB/min", "MiB/min, 2nd half"]
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(str(row[k]) for k in keys))
    if args.json:
        args.json.write_text(json.dumps({"answers": counts, "rows": rows,
                                         "samples": {str(p): s for p, s in samples.items()}}, indent=1))


if __name__ == "__main__":
    main()

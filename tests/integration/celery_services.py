"""Fixtures for Celery integration tests: a real redis-server, worker and beat in their own processes."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from django.db import connection

from middleware_hub.celery import app
from plugins_app.services.execution.chain_cache import chain_cache

ROOT = Path(__file__).resolve().parents[2]
CELERY = str(Path(sys.executable).with_name("celery"))
START_TIMEOUT = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1, details=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{details()}")


def _require_redis_server() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("HUB_TEST_REDIS"):
            pytest.fail("HUB_TEST_REDIS is set but redis-server is not on PATH (apt-get install redis-server)")
        pytest.skip("redis-server is not on PATH (install Debian's redis-server, or set HUB_TEST_REDIS=1 in CI)")
    return binary


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    binary = _require_redis_server()
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_until(lambda: _pings(url), START_TIMEOUT, "redis-server to answer PING")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _pings(url: str) -> bool:
    try:
        return redis.Redis.from_url(url, socket_timeout=1).ping()
    except redis.exceptions.ConnectionError:
        return False


def database_url() -> str:
    """The test database, as the worker processes must reach it (the file or the PostgreSQL test db)."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    if connection.vendor == "postgresql":
        auth = f"{quote(s['USER'] or '')}:{quote(s['PASSWORD'] or '')}@" if s["USER"] else ""
        return f"postgresql://{auth}{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    raise AssertionError(f"no worker database URL for {connection.vendor}")


class CeleryProcesses:
    """Starts `celery worker` and `celery beat` against the test database and a Redis broker."""

    def __init__(self, broker_url: str, logdir: Path):
        self.logdir = logdir
        self.env = dict(os.environ, DJANGO_SETTINGS_MODULE="middleware_hub.settings", CELERY_BROKER_URL=broker_url,
                        DATABASE_URL=database_url(), DATABASE_CONN_MAX_AGE="0", PYTHONPATH=str(ROOT),
                        HUB_NOTIFY_SWEEP_SECONDS="1", HUB_METERING_FLUSH_SECONDS="0", HUB_ENGINE_PROCESSES="1",
                        HUB_PLATFORM_ALLOWED_HOSTS="127.0.0.1",   # the platform stub
                        # A hand-off lost on a loaded machine is re-sent well within a test's wait.
                        HUB_NOTIFY_REQUEUE_SECONDS="10",
                        CELERY_TASK_ALWAYS_EAGER="0")
        self.procs: dict[str, subprocess.Popen] = {}
        self.count = 0

    def start(self, kind: str) -> subprocess.Popen:
        self.count += 1
        name = f"{kind}-{self.count}"
        if kind == "worker":
            args = ["worker", "-l", "info", "--concurrency", "1", "-n", f"{name}-{os.getpid()}@%h",
                    "--without-gossip", "--without-mingle", "--without-heartbeat"]
        else:
            args = ["beat", "-l", "info", "--pidfile", str(self.logdir / f"{name}.pid")]
        log = open(self.logdir / f"{name}.log", "wb")
        # Own session: stopping the group also stops the pool and hook-engine children.
        proc = subprocess.Popen([CELERY, "-A", "middleware_hub", *args], cwd=self.logdir, env=self.env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs[name] = proc
        ready = "ready." if kind == "worker" else "beat: Starting..."
        wait_until(lambda: ready in self.log(name) or proc.poll() is not None, START_TIMEOUT, f"{name} to start")
        assert proc.poll() is None, f"{name} exited:\n{self.log(name)}"
        return proc

    def log(self, name: str) -> str:
        path = self.logdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{self.log(name)[-4000:]}" for name in self.procs)

    def kill(self, proc: subprocess.Popen) -> None:
        """SIGKILL the whole group: no warm shutdown, nothing acknowledged or restored on the way out."""
        _signal_group(proc, signal.SIGKILL)
        proc.wait(10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            _signal_group(proc, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(5)


def _signal_group(proc: subprocess.Popen, sig) -> None:
    try:
        os.killpg(proc.pid, sig)   # the group of a process this fixture started (its own session)
    except ProcessLookupError:
        pass


def _point_app_at(broker_url: str, transport_options: dict) -> None:
    app.conf.broker_url = broker_url
    app.conf.broker_transport_options = transport_options
    # Connection pools are cached at first use; drop them so the next send uses this broker.
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def celery(redis_url, tmp_path, transactional_db):
    """A worker and beat for one test; tasks this test process sends go to the same Redis."""
    saved = app.conf.broker_url, dict(app.conf.broker_transport_options or {}), app.conf.task_always_eager
    redis.Redis.from_url(redis_url).flushdb()
    chain_cache.clear()   # ids repeat after a transactional test's flush
    _point_app_at(redis_url, {})
    app.conf.task_always_eager = False
    processes = CeleryProcesses(redis_url, tmp_path)
    try:
        yield processes
    finally:
        processes.stop_all()
        # Captured output: pytest shows it only when the test failed, which is when it is needed.
        print(processes.logs())
        _point_app_at(saved[0], saved[1])
        app.conf.task_always_eager = saved[2]
        chain_cache.clear()

"""A real gunicorn serving the hub from this directory (shipped gunicorn.conf.py), on a free port, for tests."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """`python -m gunicorn middleware_hub.wsgi` with its own SQLite database and engine tier."""

    def __init__(self, workers: int = 1, extra_args: tuple = (), log: Path | None = None, **env):
        self.workdir = Path(tempfile.mkdtemp(prefix="hub-served-"))
        self.db_dir = self.workdir / "db"
        self.db_dir.mkdir()
        self.port = free_port()
        self.env = dict(os.environ, DATABASE_URL=f"sqlite:///{self.db_dir / 'hub.sqlite3'}", DJANGO_DEBUG="0",
                        DJANGO_SECRET_KEY="x" * 60, HUB_ENGINE_PROCESSES="1", HUB_LANE_PROCESSES="1",
                        HUB_METERING_FLUSH_SECONDS="0", CELERY_TASK_ALWAYS_EAGER="1", **env)
        for name in ("PROMETHEUS_MULTIPROC_DIR", "HUB_ENGINE_DIR"):
            if name not in env:
                self.env.pop(name, None)
        self.workers, self.extra_args, self.log = workers, extra_args, log   # log: gunicorn's output, else ours
        self.process: subprocess.Popen | None = None

    def manage(self, *args: str) -> str:
        env = {k: v for k, v in self.env.items() if k != "PROMETHEUS_MULTIPROC_DIR"}   # only the server's processes
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                              capture_output=True, text=True).stdout

    def start(self) -> Served:
        self.manage("migrate", "--noinput")
        output = open(self.log, "ab") if self.log else None
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "middleware_hub.wsgi", "-b", f"127.0.0.1:{self.port}",
             "-w", str(self.workers), "--log-level", "warning", *self.extra_args], cwd=ROOT, env=self.env,
            stdout=output, stderr=output)
        if output is not None:
            output.close()
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "gunicorn exited while starting"
            try:
                if self.request("GET", "/healthz")[0] == 200:
                    return self
            except OSError:
                time.sleep(0.1)   # not listening yet: poll again
        raise AssertionError("gunicorn did not answer /healthz in time")

    def request(self, method: str, path: str, body=None,
                headers: dict | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
        """Status, headers (looked up by name in any case, as HTTP reads them: uvicorn's httptools
        protocol writes them lower-case) and body of one call."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            data = None if body is None else json.dumps(body)
            conn.request(method, path, data, {"Content-Type": "application/json", **(headers or {})})
            response = conn.getresponse()
            return response.status, response.msg, response.read()
        finally:
            conn.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)

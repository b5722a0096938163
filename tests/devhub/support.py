"""A whole dev hub as `make run` starts it (bin/run-dev in its own session, its data in a temp dir)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(Path(sys.executable))
START_TIMEOUT = 90
STOP_TIMEOUT = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Nothing listens, and a new server (which sets SO_REUSEADDR, as runserver does) can bind it."""
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_until(predicate, timeout: float, what: str, details=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{details()}")


def hub_env(var_dir: Path, port: int | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "CELERY_TASK_ALWAYS_EAGER")}
    env["HUB_VAR_DIR"] = str(var_dir)
    if port is not None:
        env["PORT"] = str(port)
    return env


def prepare(var_dir: Path, demo: bool = True) -> None:
    """What `make migrate demo` does, into var_dir."""
    commands = [["migrate", "--noinput"]]
    if demo:
        commands += [["sync_catalog"], ["load_demo"]]
    for command in commands:
        subprocess.run([PYTHON, "manage.py", *command], cwd=ROOT, env=hub_env(var_dir), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def session_processes(sid: int) -> dict[int, str]:
    """Every live process of a session, by pid, with its command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            found[int(entry.name)] = cmdline.strip()
    return found


class DevHub:
    """bin/run-dev started in a new session, so every process it starts can be found afterwards."""

    def __init__(self, var_dir: Path, log_path: Path):
        self.var_dir, self.log_path = var_dir, log_path
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, ignore_sigint: bool = False) -> None:
        """Start run-dev as a terminal starts a foreground job: SIGINT at its default, whatever this
        process has (pytest started as a background job has it ignored, and a shell started with SIGINT
        ignored cannot trap it). `ignore_sigint` starts it as a script's background job instead."""
        log = self.log_path.open("ab")
        # A Python handler becomes SIG_DFL in the child at exec; SIG_IGN is inherited.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN if ignore_sigint else signal.default_int_handler)
        try:
            self.proc = subprocess.Popen(["bin/run-dev"], cwd=ROOT, env=hub_env(self.var_dir, self.port),
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        finally:
            signal.signal(signal.SIGINT, previous)
            log.close()
        wait_until(self._serving, START_TIMEOUT, "runserver to answer", self.log)
        wait_until(lambda: "ready." in self.log(), START_TIMEOUT, "the Celery worker to be ready", self.log)
        wait_until(lambda: any(" beat " in f" {cmd} " for cmd in self.processes().values()), START_TIMEOUT,
                   "Celery beat to run", self.log)

    def _serving(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"bin/run-dev exited with {self.proc.returncode}\n{self.log()}")
        try:
            with urllib.request.urlopen(f"{self.url}/admin/login/", timeout=5) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def processes(self) -> dict[int, str]:
        return session_processes(self.proc.pid)

    def stop(self, signum=signal.SIGTERM) -> int:
        """Signal run-dev alone (as a terminal's Ctrl-C or a supervisor would) and wait for it."""
        self.proc.send_signal(signum)
        return self.proc.wait(STOP_TIMEOUT)

    def kill_leftovers(self) -> None:
        if self.proc is not None:
            for pid in self.processes():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


class AdminSession:
    """A person's browser session in the admin, as plain HTTP with cookies (login with its CSRF token)."""

    def __init__(self, base_url: str):
        import http.cookiejar

        self.base_url = base_url
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def _csrf(self) -> str:
        return next(c.value for c in self.cookies if c.name == "csrftoken")

    def log_in(self, username: str, password: str) -> None:
        from urllib.parse import urlencode

        self.opener.open(f"{self.base_url}/admin/login/", timeout=10).read()
        body = urlencode({"username": username, "password": password, "csrfmiddlewaretoken": self._csrf(),
                          "next": "/admin/"}).encode()
        request = urllib.request.Request(f"{self.base_url}/admin/login/", data=body,
                                         headers={"Referer": f"{self.base_url}/admin/login/"})
        with self.opener.open(request, timeout=10) as response:
            assert response.url.endswith("/admin/"), f"login as {username} failed: {response.url}"

    def status(self, path: str) -> int:
        try:
            with self.opener.open(f"{self.base_url}{path}", timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

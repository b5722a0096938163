"""bin/run-dev, as `make run` starts it: Ctrl-C or SIGTERM stops runserver, its reloader child, the
Celery worker and beat every time, leaves no process behind and frees the port; the log stays quiet."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .support import ROOT, AdminSession, DevHub, hub_env, port_is_free, prepare, wait_until

CELERY = str(Path(sys.executable).with_name("celery"))

pytestmark = [pytest.mark.slow]

STOPS = [signal.SIGTERM, signal.SIGINT, signal.SIGTERM, signal.SIGINT, signal.SIGTERM]


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("run-dev-var")
    prepare(path)
    return path


@pytest.fixture
def hub(var_dir, tmp_path):
    hub = DevHub(var_dir, tmp_path / "run-dev.log")
    yield hub
    hub.kill_leftovers()


def test_every_stop_ends_every_process_and_frees_the_port(var_dir, tmp_path):
    for round_, signum in enumerate(STOPS):
        hub = DevHub(var_dir, tmp_path / f"run-dev-{round_}.log")
        try:
            hub.start()
            started = hub.processes()
            # runserver and its reloader child, the worker and its two pool processes, beat.
            assert sum("runserver" in cmd for cmd in started.values()) == 2, started
            assert sum(" worker " in f" {cmd} " for cmd in started.values()) >= 3, started
            hub.stop(signum)
            assert hub.proc.returncode == 128 + signum
            assert hub.processes() == {}, f"survivors after {signum.name}: {hub.processes()}\n{hub.log()}"
            wait_until(lambda port=hub.port: port_is_free(port), 5, f"port {hub.port} to be free")
        finally:
            hub.kill_leftovers()


def test_children_that_ignore_sigint_still_stop(var_dir, tmp_path):
    """What a background job gets: SIGINT ignored in every child. A SIGTERM to run-dev still ends all."""
    hub = DevHub(var_dir, tmp_path / "run-dev.log")
    hub.start(ignore_sigint=True)   # the children inherit the ignored SIGINT
    try:
        assert _sigint_ignored(next(iter(p for p, cmd in hub.processes().items() if "runserver" in cmd)))
        # run-dev cannot trap a SIGINT ignored when it started, and says how to stop it instead.
        assert f"SIGINT is ignored here (started as a background job); stop it with SIGTERM: kill {hub.proc.pid}" \
            in hub.log()
        hub.stop(signal.SIGTERM)
        assert hub.processes() == {}
        assert port_is_free(hub.port)
    finally:
        hub.kill_leftovers()


def test_the_log_holds_no_sweep_lines_and_no_tracebacks_for_a_403(hub):
    hub.start()
    admin = AdminSession(hub.url)
    admin.log_in("demo-auditor", "demo-password")
    # An auditor may not install: the admin refuses with a 403 (PermissionDenied in the view).
    assert admin.status("/admin/plugins_app/installation/add/") == 403
    wait_until(lambda: sweeps_run(hub) >= 3, 60, "the worker to run three notification sweeps", hub.log)
    hub.stop()
    log = hub.log()
    refusals = [line for line in log.splitlines() if "Forbidden" in line]
    assert len(refusals) == 1 and "/admin/plugins_app/installation/add/" in refusals[0]
    assert "Traceback" not in log
    # The worker's banner lists the task once; no line is written per sweep.
    assert "deliver_due_notifications[" not in log and "Sending due task" not in log
    assert "No hostname was supplied" not in log
    assert " ERROR" not in log and "ERROR/" not in log


def sweeps_run(hub) -> int:
    """How many notification sweeps the running worker has finished (`celery inspect stats`)."""
    answer = subprocess.run([CELERY, "-A", "middleware_hub", "inspect", "stats", "--json", "-t", "5"], cwd=ROOT,
                            env=hub_env(hub.var_dir), capture_output=True, text=True, timeout=60)
    if answer.returncode != 0:
        return 0
    stats = json.loads(answer.stdout.strip().splitlines()[-1])
    return sum(worker.get("total", {}).get("plugins_app.tasks.deliver_due_notifications", 0)
               for worker in stats.values())


def _sigint_ignored(pid: int) -> bool:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    return False


def _sweeps_ran(var_dir) -> int:
    """How many sweeps the worker has taken from the file-system broker."""
    return sum(1 for _ in (var_dir / "broker" / "processed").iterdir())

"""gunicorn settings read when the hub is served from this directory: threaded workers, one engine tier."""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from plugins_app.runtime.config import EngineConfig
from plugins_app.runtime.environment import Env

# A request waiting on an engine holds a thread, not a whole worker: a slow or runaway plugin
# can't occupy the workers every other account needs.
worker_class = "gthread"
threads = Env(os.environ).integer("HUB_WORKER_THREADS", 16, minimum=1)

TIER_CHECK_SECONDS = 0.5   # how soon the master notices a dead supervisor

_tier = None
_stopping = threading.Event()   # set at exit: the supervisor's end is then no fault
_tier_dir = None   # made here (and removed at exit) when the operator runs no tier of their own
_metrics_dir = None   # made here (and removed at exit) when the operator gave none


def engine_config() -> EngineConfig:
    """The tier's configuration, read as Django's settings and the supervisor read it (one default each)."""
    return EngineConfig.from_env(os.environ)


def on_starting(server):
    """Start the machine's engine tier before any worker: every worker connects to the same
    engines, so an account's compartments are warm once per machine, not once per worker."""
    global _tier_dir
    # Checked before anything starts: a bad value stops gunicorn here, with the variable's name.
    config = engine_config()
    _prepare_metrics_dir()
    if Env(os.environ).text("HUB_ENGINE_DIR"):   # the operator runs the tier as a service of its own
        return
    directory = _tier_dir = tempfile.mkdtemp(prefix="hub-engines-")
    _start_tier(directory, config)
    os.environ["HUB_ENGINE_DIR"] = directory
    server.log.info("hook engine tier: %s engines and %s lane engine(s) in %s", config.processes,
                    config.lane_processes, directory)
    threading.Thread(target=_keep_tier, args=(server, directory, config), daemon=True, name="tier-keeper").start()


def _start_tier(directory: str, config: EngineConfig) -> None:
    """Starts the supervisor on `directory` and waits for its tier.json (written once its sockets listen)."""
    global _tier
    layout = Path(directory) / "tier.json"
    layout.unlink(missing_ok=True)   # a killed supervisor's: the new one writes its own
    _tier = subprocess.Popen([sys.executable, "-m", "plugins_app.runtime.engine.supervisor", directory,
                              "--engines", str(config.processes), "--lane", str(config.lane_processes),
                              "--isolate-memory-mb", str(config.isolate_memory_mb),
                              "--engine-memory-mb", str(config.engine_memory_mb)],
                             cwd=Path(__file__).resolve().parent)
    deadline = time.monotonic() + 30
    while not layout.exists():
        if _tier.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the hook engine tier did not start")
        time.sleep(0.05)


def _keep_tier(server, directory: str, config: EngineConfig) -> None:
    """In the master: a supervisor that died (killed, out of memory) is started again on the same
    sockets, so the workers' next calls reach its new engines (their links to the old ones are found
    stale by pid); meanwhile execute answers 503 with Retry-After. Polled rather than waited on:
    gunicorn's master reaps every child itself."""
    while not _stopping.wait(TIER_CHECK_SECONDS):
        if _tier is None or _tier.poll() is None:
            continue
        server.log.error("the hook engine supervisor exited (%s); starting it again", _tier.returncode)
        try:
            _start_tier(directory, config)
            server.log.info("hook engine tier restarted in %s", directory)
        except Exception as exc:   # tried again at the next check: the master must outlive this
            server.log.error("could not restart the hook engine tier: %s", exc)


def _prepare_metrics_dir():
    """prometheus_client's multiprocess mode: every worker writes its metrics to files in one
    directory, which /metrics sums. Set before any worker imports the library; emptied at start,
    since files of a previous run's processes would be summed in too."""
    global _metrics_dir
    directory = Env(os.environ).text("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        for stale in Path(directory).glob("*.db"):
            stale.unlink()
    else:
        directory = _metrics_dir = tempfile.mkdtemp(prefix="hub-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)   # drops its live gauges; its counters still count


def on_exit(server):
    _stopping.set()
    if _metrics_dir is not None:
        shutil.rmtree(_metrics_dir, ignore_errors=True)
    if _tier is not None and _tier.poll() is None:
        _tier.terminate()
        try:
            _tier.wait(10)
        except subprocess.TimeoutExpired:
            _tier.kill()
    if _tier_dir is not None:
        shutil.rmtree(_tier_dir, ignore_errors=True)   # the workers' admission.lock is left in it

"""Starts a machine's engines on listening sockets and starts another whenever one exits."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

from plugins_app.runtime.config import (
    DEFAULT_ENGINE_MEMORY_MB,
    DEFAULT_ISOLATE_MEMORY_MB,
    ConfigError,
    EngineConfig,
)
from plugins_app.runtime.engine import board
from plugins_app.runtime.launch import EngineArgs
from plugins_app.runtime.protocol import TierLayout

logger = logging.getLogger(__name__)
LANE_NICE = 10   # the lane's engine yields the CPU to the shared engines under load


class Slot:
    """One engine's place: its listening socket outlives the processes that serve it, so a web
    process that connects while an engine is being replaced just waits in the backlog."""

    def __init__(self, path: Path, env: dict[str, str], memory_mb: int, nice: int = 0,
                 engine_memory_mb: int = DEFAULT_ENGINE_MEMORY_MB, board: int | None = None, seat: int | None = None,
                 spare: bool = True):
        self.path = path
        self.spare = spare
        self.board, self.seat = board, seat
        self.env = env
        self.memory_mb, self.nice, self.engine_memory_mb = memory_mb, nice, engine_memory_mb
        if path.exists():
            path.unlink()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(256)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, lifeline: int) -> None:
        self.proc = EngineArgs(self.memory_mb, listen=self.listener.fileno(), lifeline=lifeline,
                               nice=self.nice, engine_memory_mb=self.engine_memory_mb,
                               board=self.board, seat=self.seat, spare=self.spare).start(self.env)
        self.starts += 1

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


class Supervisor:
    """`engines` shared engines and `lane` lower-priority ones, each restarted when it exits."""

    def __init__(self, directory: str | Path, engines: int = 2, lane: int = 1, env: dict[str, str] | None = None,
                 memory_mb: int = DEFAULT_ISOLATE_MEMORY_MB, engine_memory_mb: int = DEFAULT_ENGINE_MEMORY_MB):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.memory_mb = memory_mb
        base = dict(env if env is not None else os.environ)
        # The shared engines tell each other which account each runs, so that one account's calls
        # that hold an engine (asleep, awaiting, computing) take one of them, never every one.
        self.board = board.create(str(self.directory / "engines.board"), max(1, engines))
        self.slots = [Slot(self.directory / f"engine-{i}.sock", base, memory_mb, engine_memory_mb=engine_memory_mb,
                           board=self.board, seat=i)
                      for i in range(max(1, engines))]
        self.lane_slots = [Slot(self.directory / f"lane-{i}.sock", base, memory_mb, nice=LANE_NICE,
                                engine_memory_mb=engine_memory_mb) for i in range(lane)]
        # Compiles (transpiling, type checks, the install probe) have an engine of their own at the lane's
        # priority: TypeScript's checker grows a process by hundreds of MiB, which in a shared engine
        # would count against whichever chain was running there, and its CPU would compete with chains.
        self.compiler_slots = [Slot(self.directory / "compiler-0.sock", base, memory_mb, nice=LANE_NICE,
                                    engine_memory_mb=engine_memory_mb, spare=False)]
        self._lifeline_r, self._lifeline_w = os.pipe()   # engines exit when this process is gone
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def all_slots(self) -> list[Slot]:
        return self.slots + self.lane_slots + self.compiler_slots

    def start(self) -> Supervisor:
        for slot in self.all_slots:
            slot.start(self._lifeline_r)
        self._watcher = threading.Thread(target=self._watch, daemon=True, name="engine-supervisor")
        self._watcher.start()
        return self

    def _watch(self) -> None:
        while not self._stopping.wait(0.05):
            for slot in self.all_slots:
                if slot.proc is not None and slot.proc.poll() is not None and not self._stopping.is_set():
                    logger.warning("hook engine %s exited (%s); starting another", slot.path.name, slot.proc.returncode)
                    try:
                        slot.start(self._lifeline_r)
                    except Exception:   # out of processes or memory for a moment: this thread must live on
                        logger.exception("could not start hook engine %s; trying again", slot.path.name)

    def describe(self) -> TierLayout:
        """Its engines' sockets: what a web process connects to (web/tier.py's tier_for)."""
        return {"engines": [str(s.path) for s in self.slots], "lane": [str(s.path) for s in self.lane_slots],
                "compilers": [str(s.path) for s in self.compiler_slots],
                "isolateMemoryMb": self.memory_mb}

    def restarts(self) -> int:
        return sum(s.starts - 1 for s in self.all_slots)

    def stop(self) -> None:
        self._stopping.set()
        for slot in self.all_slots:
            slot.stop()
            slot.listener.close()
            if slot.path.exists():
                slot.path.unlink()
        (self.directory / "engines.board").unlink(missing_ok=True)
        for fd in (self._lifeline_r, self._lifeline_w, self.board):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.directory.rmdir()   # only when nothing else was left in it
        except OSError:
            pass


def local_supervisor(engines: int, lane: int = 1, memory_mb: int = DEFAULT_ISOLATE_MEMORY_MB,
                     engine_memory_mb: int = DEFAULT_ENGINE_MEMORY_MB) -> Supervisor:
    """A supervisor inside this process, on sockets in a private directory (tests, runserver, Celery)."""
    return Supervisor(tempfile.mkdtemp(prefix="hub-engines-"), engines, lane, memory_mb=memory_mb,
                      engine_memory_mb=engine_memory_mb).start()


def main() -> None:
    """A machine's tier as a process of its own: gunicorn.conf.py starts one with its configuration's
    values; an operator may run one apart (HUB_ENGINE_DIR), its defaults read from the environment."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory")
    try:
        config = EngineConfig.from_env(os.environ)
    except ConfigError as exc:
        parser.error(str(exc))
    parser.add_argument("--engines", type=int, default=config.processes)
    parser.add_argument("--lane", type=int, default=config.lane_processes)
    parser.add_argument("--isolate-memory-mb", type=int, default=config.isolate_memory_mb)
    parser.add_argument("--engine-memory-mb", type=int, default=config.engine_memory_mb)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="[engines] %(message)s")
    supervisor = Supervisor(args.directory, args.engines, args.lane, memory_mb=args.isolate_memory_mb,
                            engine_memory_mb=args.engine_memory_mb).start()
    layout = Path(args.directory) / "tier.json"
    layout.write_text(json.dumps(supervisor.describe()))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # Exit with the parent (gunicorn's master) even if it could not say so.
    parent = os.getppid()
    while not stop.wait(0.5):
        if os.getppid() != parent:
            break
    layout.unlink(missing_ok=True)
    supervisor.stop()


if __name__ == "__main__":
    main()

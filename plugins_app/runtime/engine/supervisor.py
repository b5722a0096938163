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
import time
from pathlib import Path

from plugins_app.runtime import pulse
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
WATCH_SECONDS = 0.05
# A look that comes this much later than WATCH_SECONDS means this process was not running meanwhile.
MISSED_WATCH_SECONDS = 1.0


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
        self.pulse_fd = pulse.create(pulse.pulse_path(str(path)))
        self.pulse = pulse.Pulse(self.pulse_fd)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.hung_kills = 0   # engines this slot replaced because their pulse stopped

    def start(self, lifeline: int) -> None:
        # Before the process exists (starting one takes a while on a busy machine) and until it beats,
        # web processes see it starting, and wait for it or go elsewhere, rather than see it silent.
        self.pulse.starting(0)
        self.proc = EngineArgs(self.memory_mb, listen=self.listener.fileno(), lifeline=lifeline,
                               nice=self.nice, engine_memory_mb=self.engine_memory_mb,
                               board=self.board, seat=self.seat, spare=self.spare, pulse=self.pulse_fd).start(self.env)
        self.pulse.starting(self.proc.pid)
        self.starts += 1

    def hung(self, hung_seconds: float, now: float) -> bool:
        """Whether its running engine's pulse says it stopped: no beat for `hung_seconds` before `now`,
        or still not beating well past the start's grace. `now` is read before the pulse: a look that
        stalls between the two (its process starved or stopped) then sees a beat from after `now`,
        never a gap that was the supervisor's own."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        _, state, _ = self.pulse.read()
        if state == pulse.STARTING:
            return self.pulse.silent(now)
        return self.pulse.quiet_for(now) > hung_seconds

    def kill_hung(self) -> None:
        """Ends an engine that stopped beating (the watch starts another when it sees it gone)."""
        if self.proc is not None:
            self.hung_kills += 1
            self.proc.kill()
            self.proc.wait(5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def close(self) -> None:
        self.listener.close()
        self.pulse.close()
        os.close(self.pulse_fd)
        for path in (self.path, Path(pulse.pulse_path(str(self.path)))):
            path.unlink(missing_ok=True)


class Supervisor:
    """`engines` shared engines and `lane` lower-priority ones, each restarted when it exits."""

    def __init__(self, directory: str | Path, engines: int = 2, lane: int = 1, env: dict[str, str] | None = None,
                 memory_mb: int = DEFAULT_ISOLATE_MEMORY_MB, engine_memory_mb: int = DEFAULT_ENGINE_MEMORY_MB,
                 hung_seconds: float = pulse.HUNG_SECONDS):
        self.directory = Path(directory)
        self.hung_seconds = hung_seconds   # tests shorten it; operators have no reason to
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
        # An engine's silence is judged only over time this thread watched: when it stood still itself
        # (SIGSTOP, a machine frozen or starved for seconds), every engine stood still with it, and the
        # first look after would take all of them for hung. Each then has the whole limit again.
        watching_since = last = time.monotonic()
        while not self._stopping.wait(WATCH_SECONDS):
            now = time.monotonic()
            if now - last > MISSED_WATCH_SECONDS:
                logger.warning("the engine supervisor stood still for %.1f s; judging its engines' silence afresh",
                               now - last)
                watching_since = now
            last = now
            judging = now - watching_since >= self.hung_seconds
            for slot in self.all_slots:
                if judging and slot.hung(self.hung_seconds, now) and not self._stopping.is_set():
                    # Its own pulse stopped (stopped, hung in its loop): replacing it is this process's
                    # call alone, never a web process's, which only stops waiting for it.
                    logger.warning("hook engine %s stopped beating for %.1f s (%s); replacing it",
                                   slot.path.name, slot.pulse.quiet_for(now),
                                   "not started" if slot.pulse.is_starting() else "was beating")
                    slot.kill_hung()
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

    def hung_kills(self) -> int:
        """Engines replaced because their pulse stopped."""
        return sum(s.hung_kills for s in self.all_slots)

    def stop(self) -> None:
        self._stopping.set()
        for slot in self.all_slots:
            slot.stop()
            slot.close()
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
                     engine_memory_mb: int = DEFAULT_ENGINE_MEMORY_MB, hung_seconds: float = pulse.HUNG_SECONDS) -> Supervisor:
    """A supervisor inside this process, on sockets in a private directory (tests, runserver, Celery)."""
    return Supervisor(tempfile.mkdtemp(prefix="hub-engines-"), engines, lane, memory_mb=memory_mb,
                      engine_memory_mb=engine_memory_mb, hung_seconds=hung_seconds).start()


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
    parser.add_argument("--hung-seconds", type=float, default=pulse.HUNG_SECONDS, help=argparse.SUPPRESS)   # tests
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="[engines] %(message)s")
    supervisor = Supervisor(args.directory, args.engines, args.lane, memory_mb=args.isolate_memory_mb,
                            engine_memory_mb=args.engine_memory_mb, hung_seconds=args.hung_seconds).start()
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

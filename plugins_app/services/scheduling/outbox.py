"""Tasks on their way to the broker: published by a thread of this process, never on a request's path;
what the broker does not take is kept in a spool on disk and sent again once it does."""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

from plugins_app.services.log_once import OncePerInterval

logger = logging.getLogger(__name__)

RETRY_SECONDS = 2.0     # how often the spool is offered to the broker again
MEMORY_LIMIT = 10_000   # tasks waiting in memory for the sender; beyond this they go straight to disk
BATCH = 100             # tasks the sender takes at once
LOG_SECONDS = 10        # a broker outage, or a full disk, is logged once per this many seconds, not once per task

Item = tuple[str, list]   # (task name, its arguments): JSON-ready
Publish = Callable[[str, list], None]
Count = Callable[[str, str], None]   # (task name, outcome): sent | spooled | resent | lost


class Outbox:
    """One per process. `put` only hands a task to memory (or, when that is full, to disk); the
    sender thread publishes it. A task the broker refused is written to `directory` and published
    again every RETRY_SECONDS, by this process or any other of the machine that shares the directory
    (a file is claimed by renaming it), so a broker outage loses nothing and a process that exits
    leaves its unsent tasks there. A task may so be delivered twice, never not at all: every task
    is safe to run twice (tasks.py)."""

    def __init__(self, directory: Callable[[], Path], publish: Publish, retry_seconds: float = RETRY_SECONDS):
        self._directory = directory
        self.publish = publish
        self.retry_seconds = retry_seconds
        self.on_count: Count = lambda task, outcome: None
        self._items: queue.Queue[Item] = queue.Queue(MEMORY_LIMIT)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._names = itertools.count()
        self._log = OncePerInterval(logger, LOG_SECONDS)
        self._idle = threading.Condition()
        self._busy = 0   # tasks taken from memory, not yet sent or spooled
        # A forked child (a Celery pool process) has no sender thread, and its locks may have been
        # held by the parent's at the fork: it starts afresh, and sends only what it puts itself.
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        self._items = queue.Queue(MEMORY_LIMIT)
        self._lock = threading.Lock()
        self._idle = threading.Condition()
        self._busy = 0
        self._thread = None
        self._log = OncePerInterval(logger, LOG_SECONDS)

    @property
    def directory(self) -> Path:
        path = self._directory()
        path.mkdir(parents=True, exist_ok=True)
        return path

    def put(self, task: str, args: list) -> None:
        self.start()
        try:
            self._items.put_nowait((task, list(args)))
        except queue.Full:   # the broker has been away long: disk, not memory, holds the rest
            self._spool([(task, list(args))], counted=True)

    def start(self) -> None:
        """The sender runs (started in this process, if it was not: a forked child has none)."""
        if self._pid == os.getpid() and self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._pid == os.getpid() and self._thread is not None and self._thread.is_alive():
                return
            if self._pid != os.getpid():   # first start in this process (forked children: see _forked)
                atexit.register(self.stop)
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._run, daemon=True, name="task-outbox")
            self._thread.start()

    def stop(self) -> None:
        """At exit: what is still in memory goes to the spool, for another process to send."""
        left = self._drain(MEMORY_LIMIT)
        if left:
            self._spool(left, counted=True)

    def wait_idle(self, timeout: float) -> bool:
        """Whether everything put so far was sent or spooled within `timeout` (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._items.qsize() or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(min(remaining, 0.05))
        return True

    def pending(self) -> int:
        """Tasks in the spool, waiting for the broker."""
        total = 0
        for path in self.directory.glob("*.json*"):
            try:
                total += len(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return total

    # -- the sender ---------------------------------------------------------------------------------
    def _run(self) -> None:
        next_replay = 0.0
        while True:
            try:
                first = self._items.get(timeout=self.retry_seconds)
                with self._idle:
                    self._busy += 1
                batch = [first] + self._drain(BATCH - 1, counted_busy=True)
            except queue.Empty:
                batch = []
            try:
                if batch:
                    self._send(batch, "sent", counted=True)
                if time.monotonic() >= next_replay:
                    next_replay = time.monotonic() + self.retry_seconds
                    self._replay()
            except Exception:   # the sender must outlive any one fault
                logger.exception("the task outbox failed a round; trying again")
            finally:
                with self._idle:
                    self._busy -= len(batch)
                    self._idle.notify_all()

    def _drain(self, limit: int, counted_busy: bool = False) -> list[Item]:
        items: list[Item] = []
        while len(items) < limit:
            try:
                items.append(self._items.get_nowait())
            except queue.Empty:
                break
        if counted_busy and items:
            with self._idle:
                self._busy += len(items)
        return items

    def _send(self, items: list[Item], outcome: str, counted: bool) -> bool:
        """Publishes `items`; from the first the broker refuses on, the rest go to the spool without
        another wait on the broker. Whether all were sent."""
        for index, (task, args) in enumerate(items):
            try:
                self.publish(task, args)
            except Exception as exc:
                self._log_outage(exc)
                self._spool(items[index:], counted=counted)
                return False
            self.on_count(task, outcome)
        return True

    def _log_outage(self, exc: Exception) -> None:
        self._log.log("outage", logging.WARNING, "the broker did not take a task (%s: %s); kept in %s and sent "
                      "again every %s s", type(exc).__name__, exc, self.directory, self.retry_seconds)

    def _spool(self, items: list[Item], counted: bool) -> None:
        """Writes `items` as one new file (written whole under a temporary name, then renamed)."""
        temporary = None
        try:
            directory = self.directory
            name = f"{time.time_ns()}-{os.getpid()}-{next(self._names)}.json"
            temporary = directory / f".{name}.tmp"
            temporary.write_text(json.dumps(items))
            os.replace(temporary, directory / name)
        except OSError as exc:   # not even the disk took them: the one loss there is, counted and logged
            if temporary is not None:   # a full disk leaves the file half written, or empty: not kept
                with contextlib.suppress(OSError):
                    temporary.unlink(missing_ok=True)
            self._log.log(("lost", type(exc).__name__), logging.ERROR, "could not keep %s task(s) for the broker "
                          "(%s: %s): lost", len(items), type(exc).__name__, exc, exc_info=True)
            for task, _ in items:
                self.on_count(task, "lost")
            return
        if counted:
            for task, _ in items:
                self.on_count(task, "spooled")

    def _replay(self) -> None:
        directory = self.directory
        self._reclaim(directory)
        for path in sorted(directory.glob("*.json")):
            claimed = path.with_name(f"{path.name}.{os.getpid()}.sending")
            try:
                os.rename(path, claimed)   # one process sends a file; another that tries finds it gone
                items = [(task, args) for task, args in json.loads(claimed.read_text())]
            except FileNotFoundError:
                continue
            except (OSError, ValueError):
                logger.exception("unreadable task spool file %s, left as %s", path, claimed)
                continue
            sent = self._send(items, "resent", counted=False)
            claimed.unlink(missing_ok=True)
            if not sent:
                return   # the broker is still away: the rest waits for the next round

    @staticmethod
    def _reclaim(directory: Path) -> None:
        """Files a process claimed and died before sending go back to the spool."""
        for claimed in directory.glob("*.json.*.sending"):
            pid = int(claimed.name.rsplit(".", 2)[1])
            if pid == os.getpid():
                continue
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os.replace(claimed, claimed.with_name(claimed.name.rsplit(".", 2)[0]))
            except PermissionError:
                pass

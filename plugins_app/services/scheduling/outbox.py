"""Tasks on their way to the broker: published by a thread of this process, never on a request's path;
what the broker does not take is kept in a journal on disk and sent again once it does."""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

from plugins_app.services.log_once import OncePerInterval
from plugins_app.services.scheduling.journal import Item, Journal, Row, SpoolError, adopt_legacy, legacy_pending

logger = logging.getLogger(__name__)

RETRY_SECONDS = 2.0     # how often the spool is offered to the broker again
MEMORY_LIMIT = 10_000   # tasks waiting in memory for the sender; beyond this they go straight to disk
BATCH = 100             # tasks the sender takes at once
LOG_SECONDS = 10        # a broker outage, or a full disk, is logged once per this many seconds, not once per task

Publish = Callable[[str, list], None]
Count = Callable[[str, str], None]   # (task name, outcome): sent | spooled | resent | lost

class Outbox:
    """One per process. `put` only hands a task to memory (or, when that is full, to disk); the
    sender thread publishes it. A task the broker refused is written to the journal in `directory`
    (one SQLite file, journal.py) and published again every RETRY_SECONDS, by this process or any
    other of the machine that shares the directory (a row is claimed by the process sending it, and
    a dead process's claims are given back), so a broker outage loses nothing and a process that exits
    leaves its unsent tasks there. A task may so be delivered twice, never not at all: every task is
    safe to run twice (tasks.py). Only a write the disk refuses loses its tasks: counted `lost` and
    logged once per LOG_SECONDS with how many."""

    def __init__(self, directory: Callable[[], Path], publish: Publish, retry_seconds: float = RETRY_SECONDS):
        self._directory = directory
        self.publish = publish
        self.retry_seconds = retry_seconds
        self.on_count: Count = lambda task, outcome: None
        self._journal = Journal(lambda: self.directory)
        self._items: queue.Queue[Item] = queue.Queue(MEMORY_LIMIT)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0
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
        self._journal.forked()

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
        self._log.flush()

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
        """Tasks in the spool, waiting for the broker (an older version's files included)."""
        return self._journal.count() + legacy_pending(self.directory)

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
                    sent = self._send(batch)
                    if sent < len(batch):   # from the first refused on, without another wait on the broker
                        self._spool(batch[sent:], counted=True)
                if time.monotonic() >= next_replay:
                    next_replay = time.monotonic() + self.retry_seconds
                    self._replay()
                self._log.flush()   # the count of a failure that stopped is still told
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

    def _send(self, items: list[Item], outcome: str = "sent") -> int:
        """Publishes `items` up to the first the broker refuses. How many it took."""
        for index, (task, args) in enumerate(items):
            try:
                self.publish(task, args)
            except Exception as exc:
                self._log.log("outage", logging.WARNING, "the broker did not take a task (%s: %s); kept in %s "
                              "and sent again every %s s", type(exc).__name__, exc, self.directory,
                              self.retry_seconds)
                return index
            self.on_count(task, outcome)
        return len(items)

    def _spool(self, items: list[Item], counted: bool) -> None:
        """Writes `items` to the journal; what the disk does not take is the one loss there is."""
        kept, error = self._keep(items)
        if counted:
            for task, _ in items[:kept]:
                self.on_count(task, "spooled")
        if error is None:
            return
        lost = items[kept:]
        # No traceback: the error says it all (a full disk), and it repeats for every write.
        self._log.log(("lost", str(error)), logging.ERROR, "lost %d task(s): the spool in %s did not keep them "
                      "for the broker (%s)", len(lost), self._directory(), error, count=len(lost))
        for task, _ in lost:
            self.on_count(task, "lost")

    def _keep(self, items: list[Item]) -> tuple[int, SpoolError | None]:
        """How many of `items` (from the first) the journal took, and why not the rest."""
        try:
            self._journal.append(items)
            return len(items), None
        except SpoolError as exc:
            if len(items) == 1:
                return 0, exc
        for kept, item in enumerate(items):   # the disk may still take a few: one at a time, until it refuses
            try:
                self._journal.append([item])
            except SpoolError as exc:
                return kept, exc
        return len(items), None

    def _replay(self) -> None:
        """Sends the journal's waiting rows, a batch at a time, until it is empty or the broker refuses."""
        directory = self.directory
        try:
            try:
                adopt_legacy(directory, self._journal)
            except SpoolError as exc:   # no room for an older version's file yet: the journal's rows still go
                self._log_spool_fault(exc)
            self._journal.reclaim()
            while rows := self._journal.claim(BATCH):
                if not self._resend(rows):
                    return   # the broker is still away: the rest waits for the next round
            self._journal.compact()
        except SpoolError as exc:   # e.g. a full disk refused a claim: nothing changed, the rows wait
            self._log_spool_fault(exc)

    def _resend(self, rows: list[Row]) -> bool:
        """Publishes claimed rows; the sent ones leave the journal, the others wait again. Whether all went."""
        sent = 0
        try:
            sent = self._send([(task, args) for _, task, args in rows], "resent")
        finally:   # rows this process could not settle are given back by the next round's reclaim
            self._journal.settle([row[0] for row in rows[:sent]], [row[0] for row in rows[sent:]])
        return sent == len(rows)

    def _log_spool_fault(self, exc: SpoolError) -> None:
        self._log.log(("spool", str(exc)), logging.ERROR, "the task spool in %s failed a round (%s); what it "
                      "holds is sent in a later one", self._directory(), exc)

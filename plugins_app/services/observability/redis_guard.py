"""Keeping a Redis that does not answer off the execute path (issue 40, item 2): a circuit breaker that
stops asking it, and a thread that does the asking, so a request only ever hands work over."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable

from plugins_app.services.log_once import OncePerInterval

logger = logging.getLogger(__name__)
QUEUE_LIMIT = 1000   # publishes waiting for the thread; past it they are dropped (and counted)


class Breaker:
    """Closed: ask. Open (after a failure): don't, for `cool_down` seconds. Then half-open: one caller
    is let through (`allow` says yes once); its success closes the breaker, its failure opens it again."""

    def __init__(self, cool_down: float, clock: Callable[[], float] = time.monotonic):
        self.cool_down, self._clock = cool_down, clock
        self._lock = threading.Lock()
        self._opened_at: float | None = None   # None: closed
        self._probing = False

    @property
    def closed(self) -> bool:
        return self._opened_at is None

    def may_ask(self) -> bool:
        """Whether `allow` would say yes now (without taking the half-open probe)."""
        with self._lock:
            return self._opened_at is None or (not self._probing
                                               and self._clock() - self._opened_at >= self.cool_down)

    def allow(self) -> bool:
        with self._lock:
            if self._opened_at is None:
                return True
            if self._probing or self._clock() - self._opened_at < self.cool_down:
                return False
            self._probing = True   # half-open: this caller is the probe
            return True

    def succeeded(self) -> None:
        with self._lock:
            self._opened_at, self._probing = None, False

    def failed(self) -> None:
        with self._lock:
            self._opened_at, self._probing = self._clock(), False


Job = Callable[[], None]


class Sender:
    """A daemon thread of this process that runs the Redis calls handed to it, one after another,
    behind a breaker: a request's `submit` never blocks, and while the breaker is open the calls
    are dropped without asking. Failures are logged once per interval with their count."""

    def __init__(self, name: str, breaker: Breaker):
        self.name, self.breaker = name, breaker
        self.dropped = 0
        self._log = OncePerInterval(logger)
        self._jobs: queue.Queue[Job] = queue.Queue(QUEUE_LIMIT)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def submit(self, job: Job) -> bool:
        """Whether `job` was taken (not: the queue is full, or the breaker open)."""
        self._start()
        try:
            self._jobs.put_nowait(job)
            return True
        except queue.Full:
            self.dropped += 1
            return False

    def idle(self) -> bool:
        return self._jobs.unfinished_tasks == 0

    def _start(self) -> None:
        if self._pid == os.getpid() and self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._pid == os.getpid() and self._thread is not None and self._thread.is_alive():
                return
            if self._pid != os.getpid():   # a forked child: the parent's queue and thread are not its own
                self._jobs = queue.Queue(QUEUE_LIMIT)
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._run, daemon=True, name=self.name)
            self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                self.run(job)
            finally:
                self._jobs.task_done()

    def run(self, job: Job) -> None:
        """One call behind the breaker (the thread's, or a caller's that may wait)."""
        if not self.breaker.allow():
            self.dropped += 1
            return
        try:
            job()
        except Exception as exc:   # the server is away, frozen or refusing: stop asking it for a while
            self.breaker.failed()
            self._log.log(type(exc).__name__, logging.WARNING, "%s: Redis did not answer (%s: %s); not asked "
                          "again for %s s", self.name, type(exc).__name__, exc, self.breaker.cool_down)
            return
        if not self.breaker.closed:
            logger.warning("%s: Redis answers again", self.name)
        self.breaker.succeeded()

"""What metering and latency share: adds kept in memory, written by a thread of the process in batches."""

from __future__ import annotations

import atexit
import logging
import threading

from django.conf import settings
from django.db import close_old_connections

logger = logging.getLogger(__name__)


class BufferedWriter:
    """Subclasses keep their adds under `_lock` and write them in `flush()`; `added()` after each add
    writes at once when HUB_METERING_FLUSH_SECONDS is 0, or makes sure the flushing thread runs."""

    thread_name = "hub-buffered-writer"

    def __init__(self):
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def interval(self) -> float:
        return float(getattr(settings, "HUB_METERING_FLUSH_SECONDS", 2.0))

    def flush(self) -> int:
        raise NotImplementedError

    def periodic(self) -> None:
        """What the thread does every interval."""
        self.flush()

    def added(self) -> None:
        if self.interval <= 0:
            self.flush()
        else:
            self._ensure_thread()

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
            self._thread.start()
            atexit.register(self.flush)

    def _loop(self) -> None:
        stop = threading.Event()
        while not stop.wait(self.interval):
            try:
                self.periodic()
            except Exception:   # the thread must live on: what failed stays pending
                logger.exception("%s: flush failed", self.thread_name)
            finally:
                close_old_connections()

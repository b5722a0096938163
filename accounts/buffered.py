"""Adds kept in memory and written by a thread of the process in batches: API key use, metering, latency."""

from __future__ import annotations

import atexit
import logging
import threading
from typing import Any

from django.conf import settings
from django.db import close_old_connections, transaction

logger = logging.getLogger(__name__)
BATCH = 200   # pending keys written per transaction


class BatchConflict(Exception):
    """A row a batch was prepared from changed before the batch was written."""


class BufferedWriter:
    """Subclasses keep their adds in `_pending` under `_lock`, and say how to write (`write_many`
    for a batch, `write_one` for a key, or both; each defaults to the other) and keep one that
    failed for the next flush (`keep`). `added()` after each add writes at once
    when HUB_METERING_FLUSH_SECONDS is 0, or makes sure the flushing thread runs."""

    thread_name = "hub-buffered-writer"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pending: dict[Any, Any] = self.new_pending()

    @property
    def interval(self) -> float:
        return float(getattr(settings, "HUB_METERING_FLUSH_SECONDS", 2.0))

    def new_pending(self) -> dict[Any, Any]:
        """An empty `_pending`."""
        return {}

    def take_pending(self) -> dict[Any, Any]:
        """What is pending, leaving `_pending` empty (called under `_lock`)."""
        pending, self._pending = self._pending, self.new_pending()
        return pending

    def write_one(self, key: Any, value: Any) -> None:
        """Writes one key (a failed batch is retried this way, key by key)."""
        self.write_many(self.prepare([(key, value)]))

    def prepare(self, batch: list[tuple[Any, Any]]) -> Any:
        """What can be worked out before the batch's transaction begins (reads, merging), so the
        write lock is held for the writes alone. Returns what `write_many` takes."""
        return batch

    def write_many(self, prepared: Any) -> None:
        """Writes a prepared batch inside the caller's transaction, in a few statements. Raising
        (BatchConflict when another process wrote a row since `prepare` read it) undoes the whole
        batch, which is then written key by key."""
        for key, value in prepared:
            self.write_one(key, value)

    def serialize(self, keys: list[Any]) -> None:
        """Called first in each transaction that writes `keys`: a writer whose rows other processes
        write too takes a lock here that orders those transactions (none by default)."""

    def keep(self, key: Any, value: Any) -> None:
        """Put back what could not be written (called under no lock)."""
        raise NotImplementedError

    def flush(self) -> int:
        """Writes every pending key; returns how many there were. Keys go in batches of a few
        statements and one commit each: SQLite has one writer, and a flush in a busy web process
        gets the GIL back only every few milliseconds after each statement, so a statement per key
        held the write lock for as much as a second while requests that write waited behind it."""
        with self._lock:
            pending = list(self.take_pending().items())
        for start in range(0, len(pending), BATCH):
            batch = pending[start:start + BATCH]
            for key, value in self._write_batch(batch):
                self.keep(key, value)
        return len(pending)

    def _write_batch(self, batch: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """Writes a batch; returns what could not be written. When the batch fails as a whole, each
        key is written under its own savepoint, so a failed one is undone and kept alone."""
        try:
            prepared = self.prepare(batch)
            with transaction.atomic():
                self.serialize([key for key, _ in batch])
                self.write_many(prepared)
            return []
        except BatchConflict:
            logger.info("%s: a row of the batch changed since it was read; writing its keys one by one",
                        self.thread_name)
        except Exception:
            logger.warning("%s: a batch of %d failed; writing its keys one by one", self.thread_name, len(batch),
                           exc_info=True)
        try:
            with transaction.atomic():
                self.serialize([key for key, _ in batch])   # once, for every key's savepoint below
                return [(key, value) for key, value in batch if not self._written(key, value, serialized=True)]
        except Exception:   # the commit failed (a deferred constraint): nothing of the batch was written
            logger.warning("%s: a batch failed at commit; writing its keys one by one", self.thread_name)
            return [(key, value) for key, value in batch if not self._written(key, value)]

    def _written(self, key: Any, value: Any, serialized: bool = False) -> bool:
        """Writes one key under its own atomic block: a savepoint inside a batch, a transaction alone."""
        try:
            with transaction.atomic():
                if not serialized:   # a transaction of its own: its lock is its own to take
                    self.serialize([key])
                self.write_one(key, value)
            return True
        except Exception:
            logger.exception("%s: a write failed; kept for the next flush", self.thread_name)
            return False

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

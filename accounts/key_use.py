"""When each API key was last used, noted by the request and written in batches by a thread."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from .buffered import BufferedWriter
from .models import ApiKey


class KeyUseRecorder(BufferedWriter):
    """A request only notes its key's use (a dict update); the write, at most once a minute per key,
    happens off the request. With a thousand accounts calling, a conditional UPDATE and its commit
    in each account's first request of the minute queued those requests behind SQLite's one writer."""

    thread_name = "hub-key-use"

    def note(self, api_key: ApiKey, now: datetime | None = None) -> None:
        """Keeps `now` as the key's latest use (pending: key pk -> when), unless it is no news."""
        now = now or timezone.now()
        if not api_key.use_is_news(now):
            return
        with self._lock:
            self._pending[api_key.pk] = now
        self.added()

    def write_many(self, prepared: list[tuple[int, datetime]]) -> None:
        # One statement for the batch: with a thousand accounts, a statement per key held SQLite's
        # write lock for seconds a minute.
        ApiKey.write_uses(prepared)

    def keep(self, key: Any, value: Any) -> None:
        with self._lock:
            self._pending.setdefault(key, value)


recorder = KeyUseRecorder()

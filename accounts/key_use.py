"""When each API key was last used, noted by the request and written in batches by a thread."""

from __future__ import annotations

from django.utils import timezone

from .buffered import BufferedWriter
from .models import ApiKey


class KeyUseRecorder(BufferedWriter):
    """A request only notes its key's use (a dict update); the write, at most once a minute per key,
    happens off the request. With a thousand accounts calling, a conditional UPDATE and its commit
    in each account's first request of the minute queued those requests behind SQLite's one writer."""

    thread_name = "hub-key-use"

    def __init__(self):
        super().__init__()
        self._pending: dict[int, object] = {}   # key pk -> the latest use noted

    def note(self, api_key: ApiKey, now=None) -> None:
        now = now or timezone.now()
        if not api_key.use_is_news(now):
            return
        with self._lock:
            self._pending[api_key.pk] = now
        self.added()

    def take_pending(self) -> dict:
        pending, self._pending = self._pending, {}
        return pending

    def write_one(self, key, value) -> None:
        ApiKey.write_use(key, value)

    def keep(self, key, value) -> None:
        with self._lock:
            self._pending.setdefault(key, value)


recorder = KeyUseRecorder()

"""Usage metering: handler runs and time, buffered in memory and flushed in batches."""

from __future__ import annotations

import logging
from collections import defaultdict

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.buffered import BufferedWriter
from plugins_app.models import UsageDaily

logger = logging.getLogger(__name__)


class Meter(BufferedWriter):
    """Adds are cheap (a dict update); flush() writes one upsert per (account, plugin, hook, day).
    With HUB_METERING_FLUSH_SECONDS = 0 every add is written at once."""

    thread_name = "hub-metering"

    def new_pending(self) -> dict:
        return defaultdict(lambda: [0, 0.0])   # (account, plugin, hook, day) -> [runs, total ms]

    def add_runs(self, account_id: int, hook: str, runs: list[tuple[str, float]]):
        """One chain's handler runs: (plugin slug, ms) each."""
        if not runs:
            return
        day = timezone.localdate()
        with self._lock:
            for plugin_slug, duration_ms in runs:
                row = self._pending[(account_id, plugin_slug, hook, day)]
                row[0] += 1
                row[1] += duration_ms
        self.added()

    def keep(self, key, value) -> None:
        with self._lock:
            row = self._pending[key]
            row[0] += value[0]
            row[1] += value[1]

    def write_one(self, key, value) -> None:
        (account_id, slug, hook, day), (runs, total_ms) = key, value
        lookup = dict(account_id=account_id, plugin_slug=slug, hook=hook, day=day)
        updated = UsageDaily.objects.filter(**lookup).update(runs=F("runs") + runs,
                                                            total_ms=F("total_ms") + total_ms)
        if updated:
            return
        try:
            with transaction.atomic():
                UsageDaily.objects.create(runs=runs, total_ms=total_ms, **lookup)
        except IntegrityError:   # another process created the row first
            UsageDaily.objects.filter(**lookup).update(runs=F("runs") + runs, total_ms=F("total_ms") + total_ms)


meter = Meter()

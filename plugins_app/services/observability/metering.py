"""Usage metering: handler runs and time, and host.kv calls, buffered in memory and flushed in batches."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from datetime import date, datetime

from django.db import connection
from django.utils import timezone

from accounts.buffered import BufferedWriter
from plugins_app.models import UsageDaily
from plugins_app.runtime.web.chain import NOT_RUN, SKIPPED
from plugins_app.services.execution.observers import ChainRun

logger = logging.getLogger(__name__)


_today: tuple = (None, None, None)   # (epoch minute, time zone, that minute's date there)


def site_today(now: float | None = None) -> date:
    """The date in the site's time zone (TIME_ZONE), as metering's days count it. Worked out once a
    minute: every time zone's day starts on a whole minute, and this runs once per execute call."""
    global _today
    now = time.time() if now is None else now
    minute, zone = int(now // 60), timezone.get_default_timezone()
    if _today[:2] != (minute, zone):
        _today = (minute, zone, datetime.fromtimestamp(minute * 60, tz=zone).date())
    return _today[2]


class Meter(BufferedWriter):
    """Adds are cheap (a dict update); flush() writes one upsert per (account, plugin, hook, day).
    With HUB_METERING_FLUSH_SECONDS = 0 every add is written at once."""

    thread_name = "hub-metering"

    def new_pending(self) -> dict:
        # (account, plugin, hook, day) -> [runs, total ms, skipped, kv reads, kv writes]
        return defaultdict(lambda: [0, 0.0, 0, 0, 0])

    def add_runs(self, account_id: int, hook: str, runs: list[tuple[str, float]],
                 skipped: list[str] | tuple[str, ...] = ()):
        """One chain's handler runs: (plugin slug, ms) each; `skipped`: the slugs of handlers whose
        matcher left them out (counted apart: never metered as runs)."""
        if not runs and not skipped:
            return
        day = site_today()
        with self._lock:
            for plugin_slug, duration_ms in runs:
                row = self._pending[(account_id, plugin_slug, hook, day)]
                row[0] += 1
                row[1] += duration_ms
            for plugin_slug in skipped:
                self._pending[(account_id, plugin_slug, hook, day)][2] += 1
        self.added()

    def add_kv(self, account_id: int, plugin_slug: str, hook: str, *, reads: int = 0, writes: int = 0) -> None:
        """One host.kv call of a recorded run (get and list read; put, delete and incr write)."""
        with self._lock:
            row = self._pending[(account_id, plugin_slug, hook, site_today())]
            row[3] += reads
            row[4] += writes
        self.added()

    def write_many(self, prepared: list) -> None:
        """One upsert statement for the batch: each row is created or added to where it stands, so
        nothing is read first and nothing another process adds meanwhile is lost."""
        table = connection.ops.quote_name(UsageDaily._meta.db_table)
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {table} (account_id, plugin_slug, hook, day, runs, total_ms, skipped, kv_reads, kv_writes)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (account_id, plugin_slug, hook, day)"
                f" DO UPDATE SET runs = {table}.runs + excluded.runs, total_ms = {table}.total_ms + excluded.total_ms,"
                f" skipped = {table}.skipped + excluded.skipped,"
                f" kv_reads = {table}.kv_reads + excluded.kv_reads, kv_writes = {table}.kv_writes + excluded.kv_writes",
                [(account_id, slug, hook, connection.ops.adapt_datefield_value(day), *row)
                 # In key order, so concurrent flushes of two processes lock shared rows in one order.
                 for (account_id, slug, hook, day), row in sorted(prepared, key=lambda item: item[0])])

    def keep(self, key, value) -> None:
        with self._lock:
            row = self._pending[key]
            for i, added in enumerate(value):
                row[i] += added


meter = Meter()


def observe_chain(run: ChainRun) -> None:
    """An after-chain observer: one metered run per handler that actually ran (not one skipped)."""
    meter.add_runs(run.account.pk, run.spec.name,
                   [(t.plugin, t.duration_ms) for t in run.result.trace if t.status not in NOT_RUN],
                   [t.plugin for t in run.result.trace if t.status == SKIPPED])

"""Handler latency histograms: recorded in memory per minute, flushed in batches, read as percentiles."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as day_time
from typing import Any

from django.db import connection
from django.utils import timezone

from accounts.buffered import BatchConflict, BufferedWriter
from plugins_app.models import LatencyHistogram
from plugins_app.runtime.protocol import TRACE_STATUSES
from plugins_app.runtime.web.chain import NOT_RUN
from plugins_app.services.execution.observers import ChainRun

logger = logging.getLogger(__name__)

# Log-scaled buckets: bucket 0 holds 0..BASE_MS, bucket i holds (BASE_MS*GROWTH**(i-1), BASE_MS*GROWTH**i].
# A percentile read as a bucket's midpoint is within GROWTH's half-step (about 9%) of the true value;
# the last bucket takes everything past about 2 minutes (far beyond any handler's budget).
BASE_MS = 0.05
GROWTH = 1.2
LAST_BUCKET = 82
_LOG_GROWTH = math.log(GROWTH)
Resolution = LatencyHistogram.Resolution
RETENTION = {Resolution.MINUTE: timedelta(days=2), Resolution.HOUR: timedelta(days=32)}   # days: kept
PRUNE_EVERY_SECONDS = 600


def bucket_index(ms: float) -> int:
    if ms <= BASE_MS:
        return 0
    return min(math.ceil(math.log(ms / BASE_MS) / _LOG_GROWTH - 1e-9), LAST_BUCKET)


def bucket_bounds(index: int) -> tuple[float, float]:
    if index == 0:
        return 0.0, BASE_MS
    return BASE_MS * GROWTH ** (index - 1), math.inf if index == LAST_BUCKET else BASE_MS * GROWTH ** index


LATENCY_LOCKS = 0x4C54   # the first key of the latency flush's advisory locks (the second: the account)


@dataclass
class Window:
    """Runs of one plugin on one hook in one window; windows merge by adding."""

    runs: int = 0
    total_ms: float = 0.0
    min_ms: float | None = None
    max_ms: float | None = None
    buckets: dict = field(default_factory=dict)    # bucket index (str, as JSON keeps it) -> count
    statuses: dict = field(default_factory=dict)   # status -> count

    def add(self, status: str, ms: float) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if status in NOT_RUN:
            return
        self.runs += 1
        self.total_ms += ms
        self.min_ms = ms if self.min_ms is None or ms < self.min_ms else self.min_ms
        self.max_ms = ms if self.max_ms is None or ms > self.max_ms else self.max_ms
        key = str(bucket_index(ms))
        self.buckets[key] = self.buckets.get(key, 0) + 1

    def merge(self, other: Window) -> Window:
        self.runs += other.runs
        self.total_ms += other.total_ms
        self.min_ms = _pick(min, self.min_ms, other.min_ms)
        self.max_ms = _pick(max, self.max_ms, other.max_ms)
        for target, source in ((self.buckets, other.buckets), (self.statuses, other.statuses)):
            for key, count in source.items():
                target[key] = target.get(key, 0) + count
        return self

    def percentile(self, q: float) -> float | None:
        """Nearest-rank percentile (0 < q <= 1), read as its bucket's midpoint within [min, max]."""
        if not self.runs:
            return None
        rank = max(1, math.ceil(q * self.runs))
        seen = 0
        for index in sorted(int(k) for k in self.buckets):
            seen += self.buckets[str(index)]
            if seen >= rank:
                assert self.min_ms is not None and self.max_ms is not None   # set by the window's first run
                low, high = bucket_bounds(index)
                return round(min(max((low + high) / 2, self.min_ms), self.max_ms), 3)
        return self.max_ms

    def summary(self) -> dict:
        return {"p50Ms": self.percentile(0.50), "p95Ms": self.percentile(0.95), "p99Ms": self.percentile(0.99),
                "maxMs": None if self.max_ms is None else round(self.max_ms, 3),
                "statusCounts": {status: self.statuses.get(status, 0) for status in TRACE_STATUSES}}

    @classmethod
    def of(cls, row: LatencyHistogram) -> Window:
        return cls(row.runs, row.total_ms, row.min_ms, row.max_ms, dict(row.buckets), dict(row.statuses))


def _pick(choose: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else choose(a, b)


def window_starts(minute: int) -> dict[str, datetime]:
    """The minute, hour and day (in the site's time zone, as metering's days) holding epoch `minute`."""
    moment = datetime.fromtimestamp(minute * 60, tz=UTC)
    local = timezone.localtime(moment)
    return {Resolution.MINUTE: moment, Resolution.HOUR: moment.replace(minute=0),
            Resolution.DAY: local.replace(hour=0, minute=0, second=0, microsecond=0)}


class LatencyRecorder(BufferedWriter):
    """Adds are cheap (a dict update per handler); flush() writes each pending minute into its
    minute, hour and day rows under one savepoint, so a failed write is kept whole for the next."""

    thread_name = "hub-latency"

    def __init__(self) -> None:
        super().__init__()   # pending: (account, plugin, hook, minute) -> Window
        self._pruned_at = 0.0

    def record(self, account_id: int, hook: str, trace) -> None:
        """One chain's trace: each entry's plugin, status and duration."""
        if not trace:
            return
        minute = int(time.time() // 60)
        with self._lock:
            for entry in trace:
                key = (account_id, entry.plugin, hook, minute)
                window = self._pending.get(key)
                if window is None:
                    window = self._pending[key] = Window()
                window.add(entry.status, entry.duration_ms)
        self.added()

    def serialize(self, keys: list) -> None:
        """On PostgreSQL, one lock per account for the transaction, taken in account order: every
        process's flush merges into the same hour and day rows of an account, and without it two
        flushes (an update here, a new row there) waited on each other until the deadlock detector
        broke one, then again key by key (hundreds of deadlocks in a minute of five admins' writes).
        SQLite's one writer already orders them."""
        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            for account_id in sorted({key[0] for key in keys}):
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LATENCY_LOCKS, account_id % 2**31])

    def prepare(self, batch: list) -> tuple[list, list]:
        """Reads the batch's minute, hour and day rows and merges into them, before any lock:
        (rows to update, each with the statuses it was read with; rows to create)."""
        windows: dict[tuple, Window] = {}   # (account, plugin, hook, resolution, start) -> what to add
        for (account_id, slug, hook, minute), window in batch:
            for resolution, start in window_starts(minute).items():
                row_key = (account_id, slug, hook, resolution, start)
                windows[row_key] = windows.get(row_key, Window()).merge(window)   # never the batch's own
        rows = {(r.account_id, r.plugin_slug, r.hook, r.resolution, r.start): r
                for r in LatencyHistogram.objects.filter(
                    account_id__in={k[0] for k in windows}, plugin_slug__in={k[1] for k in windows},
                    start__in={k[4] for k in windows})}
        updated, created = [], []
        for row_key, window in windows.items():
            row = rows.get(row_key)
            if row is None:
                account_id, slug, hook, resolution, start = row_key
                row = LatencyHistogram(account_id=account_id, plugin_slug=slug, hook=hook,
                                       resolution=resolution, start=start)
                _fill(row, window)
                created.append(row)
            else:
                read_statuses = json.dumps(row.statuses)
                _fill(row, Window.of(row).merge(window))
                updated.append((row.runs, row.total_ms, row.min_ms, row.max_ms, json.dumps(row.buckets),
                                json.dumps(row.statuses), row.pk, read_statuses))
        return updated, created

    def write_many(self, prepared: tuple[list, list]) -> None:
        """Each row updated only if its statuses are still as read: every merge adds to them, so a
        row another process merged into meanwhile is not overwritten; each new row created only if
        no other process created it since (either way BatchConflict, and the batch goes key by key)."""
        updated, created = prepared
        # Rows locked in one order (by id, and new ones by their key) in every process: two processes'
        # flushes of the same hours and days otherwise deadlock, each holding what the other waits for.
        updated = sorted(updated, key=lambda values: values[6])
        created = sorted(created, key=_row_key)
        if updated:
            as_json = _as_json()
            with connection.cursor() as cursor:
                cursor.executemany(
                    f"UPDATE {_table()} SET runs = %s, total_ms = %s, min_ms = %s, max_ms = %s, buckets = {as_json},"
                    f" statuses = {as_json} WHERE id = %s AND statuses = {as_json}", updated)
                if cursor.rowcount != len(updated):
                    raise BatchConflict(f"{len(updated) - cursor.rowcount} histogram row(s) changed since read")
        missed = len(created) - _create_missing(created)
        if missed:
            raise BatchConflict(f"{missed} histogram row(s) created by another process since read")

    def keep(self, key, value) -> None:
        with self._lock:
            kept = self._pending.get(key)
            self._pending[key] = value if kept is None else kept.merge(value)

    def write_one(self, key, window: Window) -> None:
        account_id, slug, hook, minute = key
        for resolution, start in window_starts(minute).items():
            lookup = dict(account_id=account_id, plugin_slug=slug, hook=hook, resolution=resolution, start=start)
            row = LatencyHistogram.objects.select_for_update().filter(**lookup).first()
            if row is None:
                fresh = LatencyHistogram(**lookup)
                _fill(fresh, Window().merge(window))
                if _create_missing([fresh]):
                    continue
                # Another process created the row since: merge into it, as into any row that was there.
                row = LatencyHistogram.objects.select_for_update().get(**lookup)
            _save(row, Window.of(row).merge(window))

    def prune(self, now: datetime | None = None) -> int:
        """Drops minute and hour rows past their retention; day rows are kept like daily usage."""
        now = now or timezone.now()
        deleted = 0
        for resolution, keep in RETENTION.items():
            deleted += LatencyHistogram.objects.filter(resolution=resolution, start__lt=now - keep).delete()[0]
        return deleted

    def periodic(self) -> None:
        self.flush()
        if time.monotonic() - self._pruned_at > PRUNE_EVERY_SECONDS:
            self._pruned_at = time.monotonic()
            self.prune()


def _fill(row: LatencyHistogram, window: Window) -> None:
    row.runs, row.total_ms, row.min_ms, row.max_ms = window.runs, window.total_ms, window.min_ms, window.max_ms
    row.buckets, row.statuses = window.buckets, window.statuses


def _table() -> str:
    return connection.ops.quote_name(LatencyHistogram._meta.db_table)


def _as_json() -> str:
    return "%s::jsonb" if connection.vendor == "postgresql" else "%s"


def _row_key(row: LatencyHistogram) -> tuple:
    return (row.account_id, row.plugin_slug, row.hook, row.resolution, row.start)


def _create_missing(rows: list[LatencyHistogram]) -> int:
    """Inserts the rows no other process has created meanwhile (never an IntegrityError: a race between
    two processes' flushes is normal under load); returns how many were inserted."""
    if not rows:
        return 0
    as_json, adapt = _as_json(), connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {_table()} (account_id, plugin_slug, hook, resolution, start, runs, total_ms, min_ms,"
            f" max_ms, buckets, statuses) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, {as_json}, {as_json})"
            " ON CONFLICT (account_id, plugin_slug, hook, resolution, start) DO NOTHING",
            [(r.account_id, r.plugin_slug, r.hook, r.resolution, adapt(r.start), r.runs, r.total_ms, r.min_ms,
              r.max_ms, json.dumps(r.buckets), json.dumps(r.statuses)) for r in rows])
        return cursor.rowcount


def _save(row: LatencyHistogram, window: Window) -> None:
    _fill(row, window)
    row.save()


recorder = LatencyRecorder()


def day_summaries(usage_rows) -> dict[tuple, dict]:
    """Percentiles and status counts for UsageDaily rows, by (account id, plugin, hook, day), in one query."""
    if not usage_rows:
        return {}
    tz = timezone.get_current_timezone()
    starts = {row.day: timezone.make_aware(datetime.combine(row.day, day_time.min), tz) for row in usage_rows}
    histograms = LatencyHistogram.objects.filter(
        resolution=Resolution.DAY, start__in=set(starts.values()),
        account_id__in={row.account_id for row in usage_rows},
        plugin_slug__in={row.plugin_slug for row in usage_rows})
    by_key = {(h.account_id, h.plugin_slug, h.hook, timezone.localtime(h.start, tz).date()): h for h in histograms}
    return {key: Window.of(h).summary() for key, h in by_key.items()}


EMPTY_SUMMARY = Window().summary()


def observe_chain(run: ChainRun) -> None:
    """An after-chain observer: each handler's run time into the account's latency histograms."""
    recorder.record(run.account.pk, run.spec.name, run.result.trace)

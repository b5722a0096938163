"""Latency over a range (last hour, day or 30 days): series for charts and the plugins ranked worst first."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from plugins_app.runtime.protocol import FAILED_STATUSES
from plugins_app.services.observability.latency import Resolution, Window

TOP = 5


@dataclass(frozen=True)
class Range:
    key: str
    title: str
    resolution: str
    slots: int
    step: timedelta
    label_format: str


RANGES = {r.key: r for r in (
    Range("hour", "Last hour", Resolution.MINUTE, 60, timedelta(minutes=1), "%H:%M"),
    Range("day", "Last 24 hours", Resolution.HOUR, 24, timedelta(hours=1), "%H:00"),
    Range("30d", "Last 30 days", Resolution.DAY, 30, timedelta(days=1), "%b %d"),
)}
DEFAULT_RANGE = "day"


def slot_starts(range_: Range, now: datetime) -> list[datetime]:
    """The windows' starts, oldest first, ending with the one holding `now` (days in the site's zone)."""
    local = timezone.localtime(now)
    if range_.resolution == Resolution.MINUTE:
        last = local.replace(second=0, microsecond=0)
    elif range_.resolution == Resolution.HOUR:
        last = local.replace(minute=0, second=0, microsecond=0)
    else:
        last = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if range_.resolution == Resolution.DAY:   # calendar days: rebuild each midnight in the zone
        return [timezone.make_aware(datetime.combine(last.date() - timedelta(days=i), datetime.min.time()))
                for i in reversed(range(range_.slots))]
    return [last - range_.step * i for i in reversed(range(range_.slots))]


def failures(window: Window) -> int:
    return sum(window.statuses.get(status, 0) for status in sorted(FAILED_STATUSES))


def failure_rate(window: Window) -> float:
    """Failed handlers per handler run, in percent."""
    return round(100 * failures(window) / window.runs, 2) if window.runs else 0.0


def windows_in(queryset, range_key: str, now: datetime | None = None):
    range_ = RANGES[range_key]
    return queryset.filter(resolution=range_.resolution, start__gte=slot_starts(range_, now or timezone.now())[0])


def report(queryset, range_key: str, now: datetime | None = None) -> dict:
    """`queryset`: the (scoped, filtered) histogram rows; only the range's resolution and span are read."""
    range_ = RANGES[range_key]
    starts = slot_starts(range_, now or timezone.now())
    per_slot = {start: Window() for start in starts}
    per_plugin: dict[tuple, Window] = defaultdict(Window)
    for row in windows_in(queryset, range_key, now).order_by():
        window = Window.of(row)
        if row.start in per_slot:
            per_slot[row.start].merge(window)
        per_plugin[(row.plugin_slug, row.hook)].merge(window)
    slots = [per_slot[start] for start in starts]
    plugins = [_plugin_row(slug, hook, window) for (slug, hook), window in per_plugin.items()]
    return {
        "range": range_.key, "title": range_.title, "empty": not plugins,
        "series": {
            "labels": [timezone.localtime(start).strftime(range_.label_format) for start in starts],
            "calls": [w.runs for w in slots],
            "p50": [w.percentile(0.50) for w in slots],
            "p95": [w.percentile(0.95) for w in slots],
            "p99": [w.percentile(0.99) for w in slots],
            "failureRate": [failure_rate(w) for w in slots],
        },
        "slowest": sorted(plugins, key=lambda p: (-(p["p95Ms"] or 0), p["plugin"]))[:TOP],
        "failing": sorted((p for p in plugins if p["failures"]), key=lambda p: (-p["failureRate"], p["plugin"]))[:TOP],
    }


def _plugin_row(slug: str, hook: str, window: Window) -> dict:
    summary = window.summary()
    return {"plugin": slug, "hook": hook, "runs": window.runs, "p50Ms": summary["p50Ms"], "p95Ms": summary["p95Ms"],
            "p99Ms": summary["p99Ms"], "maxMs": summary["maxMs"], "failures": failures(window),
            "failureRate": failure_rate(window), "quarantined": window.statuses.get("quarantined", 0)}

"""Latency histograms: percentiles of known durations, the three windows, flushing, and the usage API."""

import math
import time

import pytest
from django.db import connection
from django.utils import timezone

from plugins_app.models import LatencyHistogram, UsageDaily
from plugins_app.runtime.protocol import TRACE_STATUSES
from plugins_app.runtime.web.chain import HandlerTrace
from plugins_app.services.observability import latency
from plugins_app.services.observability.latency import LatencyRecorder, Window

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.usefixtures("within_one_minute")   # runs are recorded against the clock

REL_ERROR = (latency.GROWTH - 1) / 2   # a bucket midpoint is at most half a step off


def window_of(durations, status="ran") -> Window:
    window = Window()
    for ms in durations:
        window.add(status, ms)
    return window


def nearest_rank(values, q):
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


@pytest.mark.parametrize("durations", [
    [float(ms) for ms in range(1, 101)],
    [2.0] * 90 + [300.0] * 10,
    [0.3 * 1.02 ** i for i in range(400)],            # 0.3 ms .. about 0.8 s, over many buckets
])
def test_percentiles_of_known_durations_are_within_half_a_bucket(durations):
    window = window_of(durations)
    for q, name in ((0.5, "p50Ms"), (0.95, "p95Ms"), (0.99, "p99Ms")):
        expected = nearest_rank(durations, q)
        got = window.summary()[name]
        assert abs(got - expected) <= expected * REL_ERROR + 0.001, (name, got, expected)
    assert window.summary()["maxMs"] == round(max(durations), 3)
    assert window.runs == len(durations)


def test_equal_durations_give_that_exact_value():
    summary = window_of([40.0] * 50).summary()
    assert summary["p50Ms"] == summary["p99Ms"] == summary["maxMs"] == 40.0


def test_windows_merge_to_the_histogram_of_all_their_runs():
    first, second = [1.0, 5.0, 9.0, 700.0], [0.02, 3.0, 3.0, 12.5, 4800.0]
    merged = window_of(first).merge(window_of(second))
    whole = window_of(first + second)
    assert merged == whole
    assert merged.min_ms == 0.02 and merged.max_ms == 4800.0


def test_quarantined_skips_are_counted_but_have_no_duration():
    window = window_of([3.0, 4.0])
    window.add("quarantined", 0.0)
    window.add("error", 900.0)
    summary = window.summary()
    assert summary["statusCounts"] == {"ran": 2, "cancelled": 0, "error": 1, "timeout": 0, "malformed": 0,
                                       "quarantined": 1, "skipped": 0}
    assert window.runs == 3 and summary["maxMs"] == 900.0


def test_an_empty_window_has_no_percentiles():
    assert latency.EMPTY_SUMMARY["p50Ms"] is None and latency.EMPTY_SUMMARY["maxMs"] is None
    assert set(latency.EMPTY_SUMMARY["statusCounts"]) == set(TRACE_STATUSES)


def test_every_duration_falls_inside_its_bucket():
    for ms in [0.0, 0.05, 0.0501, 1.0, 1.2, 49.99, 5000.0, 119_000.0, 10**9]:
        low, high = latency.bucket_bounds(latency.bucket_index(ms))
        assert low <= ms <= high or ms == 0.0, ms
    assert latency.bucket_index(10**9) == latency.LAST_BUCKET


def traces(durations, plugin="slowpoke", status="ran"):
    return [HandlerTrace("1", plugin, status, False, ms) for ms in durations]


def test_a_flush_writes_the_minute_hour_and_day_of_the_runs(account):
    recorder = LatencyRecorder()
    recorder.record(account.pk, "systemPrompt", traces([1.0, 2.0, 30.0]))
    recorder.record(account.pk, "systemPrompt", traces([0.0], status="quarantined"))
    rows = {row.resolution: row for row in LatencyHistogram.objects.filter(account=account)}
    assert set(rows) == {"minute", "hour", "day"}
    for row in rows.values():
        assert row.runs == 3 and row.max_ms == 30.0 and row.statuses == {"ran": 3, "quarantined": 1}
    assert rows["hour"].start.minute == 0 and rows["day"].start.hour == 0
    assert rows["minute"].start <= timezone.now() < rows["minute"].start + timezone.timedelta(minutes=1)


def test_runs_buffered_between_flushes_are_written_once(account, settings):
    settings.HUB_METERING_FLUSH_SECONDS = 3600   # no flush until asked
    recorder = LatencyRecorder()
    for _ in range(5):
        recorder.record(account.pk, "systemPrompt", traces([4.0, 8.0]))
    assert not LatencyHistogram.objects.exists()
    assert recorder.flush() == 1
    recorder.record(account.pk, "systemPrompt", traces([16.0]))
    recorder.flush()
    day = LatencyHistogram.objects.get(account=account, resolution="day")
    assert day.runs == 11 and day.total_ms == 5 * 12.0 + 16.0


@pytest.mark.django_db(transaction=True)
def test_a_failed_flush_keeps_every_run_for_the_next(account, settings):
    settings.HUB_METERING_FLUSH_SECONDS = 3600
    recorder = LatencyRecorder()
    recorder.record(account.pk, "systemPrompt", traces([1.0, 2.0]))
    with connection.schema_editor() as editor:   # the database loses the table: every write fails
        editor.delete_model(LatencyHistogram)
    try:
        recorder.flush()
        recorder.record(account.pk, "systemPrompt", traces([3.0]))
        recorder.flush()
    finally:
        with connection.schema_editor() as editor:
            editor.create_model(LatencyHistogram)
    assert not LatencyHistogram.objects.exists()
    recorder.flush()
    day = LatencyHistogram.objects.get(account=account, resolution="day")
    assert day.runs == 3 and day.max_ms == 3.0 and day.min_ms == 1.0


def test_prune_drops_old_minutes_and_hours_but_keeps_days(account):
    recorder = LatencyRecorder()
    old_minute = int((time.time() - 40 * 86400) // 60)
    recorder._pending[(account.pk, "old", "systemPrompt", old_minute)] = window_of([5.0])
    recorder.record(account.pk, "systemPrompt", traces([1.0]))
    assert recorder.prune() == 2
    left = set(LatencyHistogram.objects.values_list("plugin_slug", "resolution"))
    assert left == {("old", "day"), ("slowpoke", "minute"), ("slowpoke", "hour"), ("slowpoke", "day")}


def test_the_usage_api_gives_percentiles_and_status_counts(api_client, account, other_account):
    durations = [float(ms) for ms in range(1, 101)]
    latency.recorder.record(account.pk, "systemPrompt", traces(durations) + traces([7.0], status="error"))
    latency.recorder.record(other_account.pk, "systemPrompt", traces([9999.0]))   # never shown to acme
    UsageDaily.objects.create(account=account, plugin_slug="slowpoke", hook="systemPrompt",
                              day=timezone.localdate(), runs=101, total_ms=sum(durations) + 7)
    UsageDaily.objects.create(account=account, plugin_slug="older", hook="systemPrompt",
                              day=timezone.localdate() - timezone.timedelta(days=3), runs=1, total_ms=1)
    rows = {r["plugin"]: r for r in api_client.get("/api/v1/usage").json()["results"]}
    row = rows["slowpoke"]
    assert abs(row["p50Ms"] - 51) <= 51 * REL_ERROR and abs(row["p99Ms"] - 99) <= 99 * REL_ERROR
    assert abs(row["p95Ms"] - 95) <= 95 * REL_ERROR and row["maxMs"] == 100.0
    assert row["statusCounts"]["ran"] == 100 and row["statusCounts"]["error"] == 1
    older = rows["older"]   # metered before histograms existed: nothing to report, said plainly
    assert older["p50Ms"] is None and older["statusCounts"]["ran"] == 0


def test_executing_a_chain_records_each_handler_status(api_client, install, account):
    install(appender("!"), name="fine")
    install("globalThis.middleware.systemPrompt = async () => { throw new Error('no'); };", name="broken")
    for _ in range(3):
        response = api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json")
        assert response.status_code == 200
    rows = {r["plugin"]: r for r in api_client.get("/api/v1/usage").json()["results"]}
    assert rows["fine"]["statusCounts"]["ran"] == 3 and rows["fine"]["p50Ms"] is not None
    assert rows["broken"]["statusCounts"]["error"] == 3
    assert rows["fine"]["maxMs"] >= rows["fine"]["p50Ms"]

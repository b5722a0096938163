"""Metering and latency flushes: keys written in batches, one commit each, a failed key kept alone."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts import buffered
from plugins_app.models import LatencyHistogram, UsageDaily
from plugins_app.services.latency import LatencyRecorder
from plugins_app.services.metering import Meter

from .test_latency import traces

MISSING_ACCOUNT = 987_654_321


@pytest.fixture
def writers():
    """The writers a test made; what they still hold is dropped, so nothing flushes at exit."""
    made = []
    yield made
    for writer in made:
        writer.take_pending()


@pytest.mark.django_db(transaction=True)
def test_a_flush_commits_once_per_batch_not_once_per_key(account, settings, monkeypatch, writers):
    settings.HUB_METERING_FLUSH_SECONDS = 3600
    monkeypatch.setattr(buffered, "BATCH", 4)
    meter = Meter()
    writers.append(meter)
    for i in range(10):
        meter.add_runs(account.pk, "systemPrompt", [(f"plugin-{i}", 2.0)])
    with CaptureQueriesContext(connection) as captured:
        assert meter.flush() == 10
    assert UsageDaily.objects.filter(account=account).count() == 10
    # Django commits through the driver, not as a query: the outer BEGINs count the transactions.
    begins = [q for q in captured.captured_queries if q["sql"].upper().startswith("BEGIN")]
    assert len(begins) == 3   # 10 keys in batches of 4


@pytest.mark.django_db(transaction=True)
def test_a_key_that_fails_at_commit_is_kept_and_the_rest_of_its_batch_is_written(account, settings, writers):
    settings.HUB_METERING_FLUSH_SECONDS = 3600
    meter = Meter()
    writers.append(meter)
    meter.add_runs(account.pk, "systemPrompt", [("good", 3.0)])
    # An account deleted since its runs were counted: the foreign key fails when the batch commits.
    meter.add_runs(MISSING_ACCOUNT, "systemPrompt", [("orphan", 5.0)])
    meter.add_runs(account.pk, "systemPrompt", [("also-good", 4.0)])
    assert meter.flush() == 3
    assert set(UsageDaily.objects.values_list("plugin_slug", "runs")) == {("good", 1), ("also-good", 1)}
    (key, row), = meter._pending.items()
    assert key[:3] == (MISSING_ACCOUNT, "orphan", "systemPrompt") and row == [1, 5.0]


@pytest.mark.django_db(transaction=True)
def test_latency_keeps_a_failed_minute_whole_while_the_others_are_written(account, settings, writers):
    settings.HUB_METERING_FLUSH_SECONDS = 3600
    recorder = LatencyRecorder()
    writers.append(recorder)
    recorder.record(account.pk, "systemPrompt", traces([1.0, 2.0]))
    recorder.record(MISSING_ACCOUNT, "systemPrompt", traces([7.0]))
    recorder.flush()
    assert set(LatencyHistogram.objects.values_list("account_id", "resolution")) == {
        (account.pk, "minute"), (account.pk, "hour"), (account.pk, "day")}
    (key, window), = recorder._pending.items()
    assert key[0] == MISSING_ACCOUNT and window.runs == 1

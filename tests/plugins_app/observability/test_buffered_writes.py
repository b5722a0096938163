"""Metering and latency flushes: keys written in batches, one commit each, a failed key kept alone."""

import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from accounts import buffered
from plugins_app.models import LatencyHistogram, UsageDaily
from plugins_app.services.observability.latency import LatencyRecorder
from plugins_app.services.observability.metering import Meter

from .test_latency import traces, window_of

pytestmark = pytest.mark.usefixtures("within_one_minute")   # runs are recorded against the clock

MISSING_ACCOUNT = 987_654_321


@pytest.fixture
def writers(settings):
    """Makes writers that flush only when the test asks; what they still hold at the end is
    dropped, so nothing flushes at exit."""
    settings.HUB_METERING_FLUSH_SECONDS = 3600
    made = []

    def make(cls):
        made.append(cls())
        return made[-1]
    yield make
    for writer in made:
        writer.take_pending()


@pytest.mark.django_db(transaction=True)
def test_a_flush_commits_once_per_batch_not_once_per_key(account, monkeypatch, writers):
    monkeypatch.setattr(buffered, "BATCH", 4)
    meter = writers(Meter)
    for i in range(10):
        meter.add_runs(account.pk, "systemPrompt", [(f"plugin-{i}", 2.0)])
    with CaptureQueriesContext(connection) as captured:
        assert meter.flush() == 10
    assert UsageDaily.objects.filter(account=account).count() == 10
    # Django commits through the driver, not as a query: the outer BEGINs count the transactions.
    begins = [q for q in captured.captured_queries if q["sql"].upper().startswith("BEGIN")]
    assert len(begins) == 3   # 10 keys in batches of 4


@pytest.mark.django_db(transaction=True)
def test_a_key_that_fails_at_commit_is_kept_and_the_rest_of_its_batch_is_written(account, writers):
    meter = writers(Meter)
    meter.add_runs(account.pk, "systemPrompt", [("good", 3.0)])
    # An account deleted since its runs were counted: the foreign key fails when the batch commits.
    meter.add_runs(MISSING_ACCOUNT, "systemPrompt", [("orphan", 5.0)])
    meter.add_runs(account.pk, "systemPrompt", [("also-good", 4.0)])
    assert meter.flush() == 3
    assert set(UsageDaily.objects.values_list("plugin_slug", "runs")) == {("good", 1), ("also-good", 1)}
    (key, row), = meter._pending.items()
    assert key[:3] == (MISSING_ACCOUNT, "orphan", "systemPrompt") and row == [1, 5.0, 0, 0, 0]   # runs, ms, skipped, kv reads, kv writes


@pytest.mark.django_db(transaction=True)
def test_latency_keeps_a_failed_minute_whole_while_the_others_are_written(account, writers):
    recorder = writers(LatencyRecorder)
    recorder.record(account.pk, "systemPrompt", traces([1.0, 2.0]))
    recorder.record(MISSING_ACCOUNT, "systemPrompt", traces([7.0]))
    recorder.flush()
    assert set(LatencyHistogram.objects.values_list("account_id", "resolution")) == {
        (account.pk, "minute"), (account.pk, "hour"), (account.pk, "day")}
    (key, window), = recorder._pending.items()
    assert key[0] == MISSING_ACCOUNT and window.runs == 1


def _statements(captured) -> list[str]:
    return [q["sql"] for q in captured.captured_queries
            if not q["sql"].upper().startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT"))]


@pytest.mark.django_db(transaction=True)
def test_a_metering_batch_is_a_few_statements_whatever_its_size(account, other_account, writers):
    # SQLite's one write lock is held for the whole batch: a statement per key held it long enough
    # under load for requests that write to wait behind it.
    meter = writers(Meter)
    meter.add_runs(account.pk, "systemPrompt", [(f"plugin-{i}", 1.0) for i in range(20)])
    meter.flush()
    for i in range(40):   # 20 rows to add to, 20 new ones, over two accounts
        meter.add_runs(account.pk if i < 20 else other_account.pk, "systemPrompt", [(f"plugin-{i % 20}", 2.5)])
    with CaptureQueriesContext(connection) as captured:
        assert meter.flush() == 40
    (upsert,) = _statements(captured)   # one statement: created or added to where each row stands
    assert upsert.startswith("40 times: INSERT")
    rows = {(r.account_id, r.plugin_slug): (r.runs, r.total_ms) for r in UsageDaily.objects.all()}
    assert rows == {**{(account.pk, f"plugin-{i}"): (2, 3.5) for i in range(20)},
                    **{(other_account.pk, f"plugin-{i}"): (1, 2.5) for i in range(20)}}


@pytest.mark.django_db(transaction=True)
def test_a_latency_batch_is_a_few_statements_and_merges_into_the_rows_there(account, writers):
    recorder = writers(LatencyRecorder)
    recorder.record(account.pk, "systemPrompt", traces([1.0, 40.0]))
    recorder.flush()
    for i in range(15):
        recorder.record(account.pk, "systemPrompt", traces([2.0]))
        recorder.record(account.pk, "todoAdded", traces([float(i + 1)]))
    # Another minute of the same hour and day, pending alongside: its hour and day rows are the same.
    minute = int(time.time() // 60)
    later = minute + 1 if (minute + 1) % 60 else minute - 1
    recorder._pending[(account.pk, "slowpoke", "systemPrompt", later)] = window_of([0.5], status="error")
    with CaptureQueriesContext(connection) as captured:
        assert recorder.flush() == 3
    # The read, the updates, the inserts; on PostgreSQL first the account's flush lock.
    assert len(_statements(captured)) == 3 + (connection.vendor == "postgresql")
    rows = {(r.hook, r.resolution, r.start.minute if r.resolution == "minute" else None): r
            for r in LatencyHistogram.objects.filter(account=account)}
    day = rows[("systemPrompt", "day", None)]
    assert (day.runs, day.total_ms, day.min_ms, day.max_ms) == (18, 1.0 + 40.0 + 15 * 2.0 + 0.5, 0.5, 40.0)
    assert day.statuses == {"ran": 17, "error": 1}
    assert sum(day.buckets.values()) == 18
    assert rows[("systemPrompt", "hour", None)].runs == 18
    assert {r.runs for (hook, res, _), r in rows.items() if hook == "systemPrompt" and res == "minute"} == {17, 1}
    todo = rows[("todoAdded", "day", None)]
    assert (todo.runs, todo.min_ms, todo.max_ms) == (15, 1.0, 15.0)


@pytest.mark.django_db(transaction=True)
def test_a_histogram_row_another_process_merged_into_meanwhile_is_not_overwritten(account, writers, monkeypatch):
    recorder, other = writers(LatencyRecorder), writers(LatencyRecorder)
    recorder.record(account.pk, "systemPrompt", traces([1.0]))
    recorder.flush()
    recorder.record(account.pk, "systemPrompt", traces([2.0]))
    other.record(account.pk, "systemPrompt", traces([3.0], status="timeout"))
    prepare = recorder.prepare

    def read_then_the_other_flushes(batch):
        prepared = prepare(batch)   # the rows as read: 1 run each
        other.flush()               # ...then merged into by another writer before this one writes
        return prepared

    monkeypatch.setattr(recorder, "prepare", read_then_the_other_flushes)
    recorder.flush()
    for row in LatencyHistogram.objects.filter(account=account):
        assert (row.runs, row.min_ms, row.max_ms) == (3, 1.0, 3.0)
        assert row.statuses == {"ran": 2, "timeout": 1}
    assert not recorder._pending


@pytest.mark.django_db(transaction=True)
def test_two_processes_creating_the_same_histogram_rows_lose_nothing_and_log_no_error(
        account, writers, monkeypatch, caplog):
    # The normal race under load: both flushes read no row for this minute, hour and day, the other
    # creates them first; this one must merge into them (no IntegrityError traceback, no lost counts).
    recorder, other = writers(LatencyRecorder), writers(LatencyRecorder)
    recorder.record(account.pk, "systemPrompt", traces([2.0]))
    other.record(account.pk, "systemPrompt", traces([3.0], status="timeout"))
    prepare = recorder.prepare

    def read_then_the_other_creates(batch):
        prepared = prepare(batch)   # no rows yet: all three to create
        other.flush()
        return prepared

    monkeypatch.setattr(recorder, "prepare", read_then_the_other_creates)
    with caplog.at_level("INFO"):
        recorder.flush()
    assert LatencyHistogram.objects.filter(account=account).count() == 3
    for row in LatencyHistogram.objects.filter(account=account):
        assert (row.runs, row.min_ms, row.max_ms) == (2, 2.0, 3.0)
        assert row.statuses == {"ran": 1, "timeout": 1}
    assert not recorder._pending
    assert [r.getMessage() for r in caplog.records if r.levelno >= 30] == []
    assert not any("IntegrityError" in (r.exc_text or "") + r.getMessage() for r in caplog.records)


@pytest.mark.django_db(transaction=True)
def test_a_key_written_alone_merges_into_a_row_created_between_its_read_and_its_insert(account, writers, monkeypatch):
    recorder, other = writers(LatencyRecorder), writers(LatencyRecorder)
    recorder.record(account.pk, "systemPrompt", traces([2.0]))
    other.record(account.pk, "systemPrompt", traces([3.0]))
    (key, window), = recorder.take_pending().items()
    real_filter = LatencyHistogram.objects.select_for_update

    class RowAppearsAfterTheRead:
        """The first read finds nothing; the other process's flush lands just after it."""
        def __init__(self):
            self.first = True

        def __call__(self):
            query = real_filter()
            if self.first:
                self.first = False
                other.flush()
                return query.none()
            return query

    monkeypatch.setattr(LatencyHistogram.objects, "select_for_update", RowAppearsAfterTheRead())
    with transaction.atomic():   # as a flush writes one key
        recorder.write_one(key, window)
    assert {r.runs for r in LatencyHistogram.objects.filter(account=account)} == {2}


@pytest.mark.django_db(transaction=True)
def test_flushes_of_one_account_in_two_processes_at_once_never_deadlock(account, writers, caplog):
    # Two processes' flushes of one account meet on its hour and day rows, one updating what the other
    # creates: hundreds of deadlocks (and each batch written again key by key) in a minute of load on
    # two hubs. Each flush here has its own connection, as each process does.
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has one writer: its flushes never wait on each other's rows")
    recorders = [writers(LatencyRecorder), writers(LatencyRecorder)]
    base = int(time.time() // 60) - 3 * 24 * 60   # three days back: minutes within two hours
    rounds, plugins = 12, ["a", "b", "c"]
    start = threading.Barrier(2)

    def flush_rounds(recorder: LatencyRecorder, order: list[str]) -> None:
        def conflicted(prepared):   # as when another process merged into a row since it was read
            raise buffered.BatchConflict("a row changed since read")

        recorder.write_many = conflicted   # so each batch goes key by key, in the order it was kept
        try:
            for n in range(rounds):
                minute = base + n
                for plugin in order:   # the two in opposite orders
                    recorder._pending[(account.pk, plugin, "systemPrompt", minute)] = window_of([1.0])
                    recorder._pending[(account.pk, plugin, "systemPrompt", minute + 61)] = window_of([1.0])
                start.wait(10)
                recorder.flush()
        finally:
            connections.close_all()

    with caplog.at_level("INFO"):
        threads = [threading.Thread(target=flush_rounds, args=(r, o)) for r, o in
                   zip(recorders, [plugins, plugins[::-1]], strict=True)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    messages = [r.getMessage() + (r.exc_text or "") for r in caplog.records if r.levelno >= 30]
    assert not any("deadlock" in m for m in messages), messages[:3]
    for plugin in plugins:   # and nothing lost: every run in its day row
        days = LatencyHistogram.objects.filter(account=account, plugin_slug=plugin, resolution="day")
        assert sum(day.runs for day in days) == 2 * 2 * rounds

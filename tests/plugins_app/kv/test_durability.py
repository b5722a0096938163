"""What a plugin's kv write costs the database: one statement for a step of a live counter, and on
PostgreSQL a commit that does not wait for the disk (HUB_KV_DURABLE_WRITES off), confined to the kv
write's own transaction, never a caller's."""

from dataclasses import replace

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from plugins_app.services.kv import checks, store
from plugins_app.services.kv.config import KvConfig

from ..conftest import PROMPT
from ..host.stubs import execute, reporter

SOURCE = "globalThis.middleware.systemPrompt = (c) => c.systemPrompt;"


@pytest.fixture
def ns(install):
    installation = install(SOURCE)
    return store.Namespace(installation.account_id, installation.pk)


def _postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("synchronous_commit is PostgreSQL's (DATABASE_URL=postgresql://...)")


def _commit_mode() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def _commit_mode_inside(statement: str) -> str:
    """synchronous_commit as `statement` (a kv write as it was sent) leaves its transaction: the
    statement run again in a transaction that is rolled back, so nothing changes."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(statement)
            cursor.execute("SHOW synchronous_commit")
            mode = cursor.fetchone()[0]
        transaction.set_rollback(True)
    return mode


def _write_sent(ns: store.Namespace, write) -> str:
    """The statement `write` changed the store with (a put checks its quota first, with a read)."""
    with CaptureQueriesContext(connection) as captured:
        write(ns)
    sent = captured.captured_queries[-1]["sql"]
    assert sent.split()[0] in ("WITH", "INSERT", "UPDATE", "DELETE"), sent
    return sent


def test_the_setting_is_read_from_the_environment():
    assert KvConfig.from_env({}).durable_writes is False
    assert KvConfig.from_env({"HUB_KV_DURABLE_WRITES": "1"}).durable_writes is True
    with pytest.raises(ValueError, match="HUB_KV_DURABLE_WRITES"):
        KvConfig.from_env({"HUB_KV_DURABLE_WRITES": "sometimes"})


@pytest.mark.django_db
def test_a_step_of_a_live_counter_is_one_statement(ns):
    assert store.incr(ns, "hits", 1, 60, 100) == 1   # made: read, quota, upsert
    with CaptureQueriesContext(connection) as captured:
        assert store.incr(ns, "hits", 2, 60, 100) == 3
        assert store.incr(ns, "hits", 1, None, None) == 4
    assert len(captured.captured_queries) == 2
    assert store.incr(ns, "hits", 200, 60, 100) == {"ok": False, "value": 4}


@pytest.mark.django_db(transaction=True)
def test_kv_writes_commit_relaxed_in_their_own_transaction_only(ns, settings):
    _postgresql()
    settings.HUB_KV = replace(settings.HUB_KV, durable_writes=False)
    durable = _commit_mode()
    assert durable != "off", "the test database's own synchronous_commit must be durable for this test"
    store.incr(ns, "hits", 1, None, None)
    writes = {
        "incr": lambda ns: store.incr(ns, "hits", 1, None, None),
        "put": lambda ns: store.put(ns, "note", checks.value("x"), None),
        "delete": lambda ns: store.delete(ns, "note"),
    }
    for name, write in writes.items():
        sent = _write_sent(ns, write)
        if name == "delete":
            store.put(ns, "note", checks.value("x"), None)   # a delete that deletes nothing commits nothing
        assert _commit_mode_inside(sent) == "off", name
        # The setting was the statement's transaction's: the connection's next writes (cancel rows, audit
        # rows) commit durably.
        assert _commit_mode() == durable, name
    assert store.get(ns, "hits") == 2 and store.get(ns, "note") == "x"   # the runs again were rolled back


@pytest.mark.django_db(transaction=True)
def test_a_kv_write_inside_a_callers_transaction_leaves_it_durable(ns, settings):
    _postgresql()
    settings.HUB_KV = replace(settings.HUB_KV, durable_writes=False)
    durable = _commit_mode()
    store.incr(ns, "hits", 1, None, None)
    with transaction.atomic():
        assert store.incr(ns, "hits", 1, None, None) == 2
        assert _commit_mode() == durable   # an audit row written beside it commits durably too


@pytest.mark.django_db(transaction=True)
def test_durable_writes_wait_for_the_disk(ns, settings):
    _postgresql()
    settings.HUB_KV = replace(settings.HUB_KV, durable_writes=True)
    durable = _commit_mode()
    store.incr(ns, "hits", 1, None, None)
    sent = _write_sent(ns, lambda ns: store.incr(ns, "hits", 1, None, None))
    assert _commit_mode_inside(sent) == durable
    assert store.get(ns, "hits") == 2


@pytest.mark.django_db(transaction=True)
def test_a_plugins_incr_through_the_execute_api_commits_relaxed(api_client, install, settings):
    """The execute path runs host calls outside any transaction, so its kv writes are the relaxed ones."""
    _postgresql()
    settings.HUB_KV = replace(settings.HUB_KV, durable_writes=False)
    install(reporter("systemPrompt", "host.kv.incr('hits')"), grant=["host:kv"])
    assert execute(api_client, "systemPrompt", PROMPT)["value"] == '{"ok":1}'
    with CaptureQueriesContext(connection) as captured:
        assert execute(api_client, "systemPrompt", PROMPT)["value"] == '{"ok":2}'
    steps = [q["sql"] for q in captured.captured_queries if "number = number +" in q["sql"]]
    assert len(steps) == 1 and _commit_mode_inside(steps[0]) == "off", steps


@pytest.mark.django_db(transaction=True)
def test_an_api_delete_of_a_key_commits_durably_with_its_change_log_row(api_client, install, settings):
    _postgresql()
    settings.HUB_KV = replace(settings.HUB_KV, durable_writes=False)
    installation = install(SOURCE)
    ns = store.Namespace(installation.account_id, installation.pk)
    store.put(ns, "note", checks.value("x"), None)
    with CaptureQueriesContext(connection) as captured:
        response = api_client.delete(f"/api/v1/plugins/{installation.pk}/kv?key=note")
    assert response.status_code == 200 and response.json() == {"deleted": 1}, response.content
    deletes = [q["sql"] for q in captured.captured_queries if "DELETE" in q["sql"] and "kventry" in q["sql"]]
    assert deletes and all("synchronous_commit" not in sql for sql in deletes), deletes
    assert store.get(ns, "note") is None


@pytest.mark.django_db(transaction=True)
def test_a_counters_step_is_prepared_once_and_then_only_executed(ns):
    """On PostgreSQL the store's statements are bound by the server, so from their second run on a
    connection they are prepared: parsing and planning were as long as running them."""
    _postgresql()

    def prepared() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements WHERE statement LIKE %s",
                           ["%number = number +%"])
            return [row[0] for row in cursor.fetchall()]
    store.incr(ns, "hits", 1, None, None)   # made (its own statements)
    assert prepared() == []
    for _ in range(3):
        store.incr(ns, "hits", 1, None, None)
    assert len(prepared()) == 1
    assert store.get(ns, "hits") == 4
    with CaptureQueriesContext(connection) as captured:   # logged with its values, not $1, $2...
        store.incr(ns, "hits", 1, None, None)
    assert "$1" not in captured.captured_queries[-1]["sql"]
    assert "number + 1" in captured.captured_queries[-1]["sql"]

"""A locked or hung database answers the API's JSON 503 within its configured timeouts (issue 40, item 3:
`LOCK TABLE accounts_apikey` held 20 s held every request 20 s, no 503)."""

from __future__ import annotations

import sqlite3
import threading
import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from accounts import key_use
from middleware_hub.database import POSTGRESQL, SQLITE, DatabaseConfig
from tests.integration.celery_services import database_url

VETO = "globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('no rm');"
INBOUND = {"sessionId": "10", "channelId": None, "text": "rm -rf /", "mediaIds": []}
EXECUTE = "/api/v1/hooks/userMessageInbound/execute"
SAFETY_SECONDS = 60   # a lock still held after this is given up, so a hub that waits shows as a failure, not a hang


@pytest.fixture(autouse=True)
def buffered_key_use(settings):
    # As in production: API keys' "last used" times are written by the flushing thread, off the
    # request's path (the tests' default, 0, writes them inside each call).
    settings.HUB_METERING_FLUSH_SECONDS = 3600
    yield
    key_use.recorder.take_pending()   # not written after the test's database is gone


def test_every_connection_gets_the_timeouts_and_the_url_still_wins():
    config = DatabaseConfig.from_env({"DATABASE_LOCK_TIMEOUT_SECONDS": "1.5"})
    pg = config.options(POSTGRESQL, {})
    assert pg == {"options": "-c statement_timeout=5000 -c lock_timeout=1500", "connect_timeout": 2}
    given = config.options(POSTGRESQL, {"connect_timeout": 9, "options": "-c lock_timeout=0"})
    assert given == {"options": "-c statement_timeout=5000 -c lock_timeout=1500 -c lock_timeout=0",
                     "connect_timeout": 9}
    assert config.options(SQLITE, {"init_command": "x"}) == {"init_command": "x", "timeout": 5.0}
    # The running hub's own connection has them.
    options = connection.settings_dict["OPTIONS"]
    if connection.vendor == "postgresql":
        assert f"lock_timeout={round(settings.HUB_DATABASE.lock_timeout_seconds * 1000)}" in options["options"]
    else:
        assert options["timeout"] == settings.HUB_DATABASE.sqlite_timeout_seconds


class _Held:
    """A lock another connection holds until released (or SAFETY_SECONDS passed)."""

    def __init__(self, release) -> None:
        self._release, self._done = release, threading.Event()
        self._timer = threading.Timer(SAFETY_SECONDS, self.release)
        self._timer.start()

    def release(self) -> None:
        if not self._done.is_set():
            self._done.set()
            self._timer.cancel()
            self._release()


@pytest.mark.django_db(transaction=True)
def test_a_locked_api_key_table_answers_503_json_within_the_lock_timeout(api_client, install):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's lock_timeout (DATABASE_URL=postgresql://...); SQLite's is the test below")
    install(VETO)
    assert api_client.post(EXECUTE, {"context": INBOUND}, format="json").status_code == 200
    locker = psycopg.connect(database_url())
    locker.execute("LOCK TABLE accounts_apikey IN ACCESS EXCLUSIVE MODE")   # in a transaction until rollback
    held = _Held(locker.rollback)
    try:
        started = time.monotonic()
        response = api_client.post(EXECUTE, {"context": INBOUND}, format="json")
        seconds = time.monotonic() - started
        still_held = not held._done.is_set()
    finally:
        held.release()
        locker.close()
    assert still_held, "the call was answered only once the lock was given up"
    assert response.status_code == 503 and response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "unavailable" and response["Retry-After"] == "5"
    # Bounded by the configured lock timeout (the statement timeout is the backstop), not by the lock.
    config = settings.HUB_DATABASE
    assert seconds < min(config.lock_timeout_seconds, config.statement_timeout_seconds) + 3, seconds
    # The lock gone, the same call works at once.
    assert api_client.post(EXECUTE, {"context": INBOUND}, format="json").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_held_sqlite_write_lock_answers_503_json_within_the_busy_timeout(api_client, install):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's busy timeout; PostgreSQL's lock_timeout is the test above")
    plugin = install(VETO)
    connection.close()
    connection.settings_dict["OPTIONS"]["timeout"] = 1.0   # the mechanism, faster than the 5 s default
    try:
        locker = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")   # the one writer's lock, held
        held = _Held(lambda: (locker.rollback(), locker.close()))
        try:
            started = time.monotonic()
            response = api_client.patch(f"/api/v1/plugins/{plugin.pk}", {"enabled": False}, format="json")
            seconds = time.monotonic() - started
            still_held = not held._done.is_set()
        finally:
            held.release()
    finally:
        connection.close()
        connection.settings_dict["OPTIONS"]["timeout"] = settings.HUB_DATABASE.sqlite_timeout_seconds
    assert still_held, "the call was answered only once the lock was given up"
    assert response.status_code == 503 and response["Content-Type"].startswith("application/json")
    assert response["Retry-After"] == "5" and seconds < 1.0 + 3, seconds
    assert api_client.patch(f"/api/v1/plugins/{plugin.pk}", {"enabled": False}, format="json").status_code == 200


def test_prepared_statements_can_be_turned_off_for_a_pooler():
    assert "prepare_threshold" not in DatabaseConfig.from_env({}).options(POSTGRESQL, {})
    off = DatabaseConfig.from_env({"DATABASE_PREPARED_STATEMENTS": "0"})
    assert off.options(POSTGRESQL, {})["prepare_threshold"] is None
    assert "prepare_threshold" not in off.options(SQLITE, {})
    with pytest.raises(ValueError, match="DATABASE_PREPARED_STATEMENTS"):
        DatabaseConfig.from_env({"DATABASE_PREPARED_STATEMENTS": "sometimes"})


@pytest.mark.django_db
def test_the_backend_prepares_from_the_second_run_unless_the_options_say_never():
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's (DATABASE_URL=postgresql://...)")
    from middleware_hub.postgresql.base import PREPARE_AFTER_RUNS, DatabaseWrapper

    for options, expected in (({}, PREPARE_AFTER_RUNS), ({"prepare_threshold": None}, None)):
        wrapper = DatabaseWrapper({**connection.settings_dict, "OPTIONS": {**connection.settings_dict["OPTIONS"],
                                                                            **options}})
        try:
            wrapper.ensure_connection()
            assert wrapper.connection.prepare_threshold == expected
        finally:
            wrapper.close()

"""The round-trip deadline (middleware_hub/query_deadline.py) on real sockets: a read that nothing
answers is cut off at its deadline and raises DatabaseHung, the database is then refused at once for
the breaker's time, and a read answered in time is left alone. Its use on PostgreSQL under a frozen
server is tests/integration/faults/test_database_outage.py."""

from __future__ import annotations

import socket
import time

import pytest
from django.conf import settings
from django.db import OperationalError, connection

from middleware_hub import query_deadline
from middleware_hub.database import DEADLINED_POSTGRESQL, POSTGRESQL, SQLITE, DatabaseConfig
from middleware_hub.query_deadline import DatabaseHung, Watchdog


def _read(sock: socket.socket) -> bytes:
    data = sock.recv(16)
    if not data:
        raise OSError("the socket was shut down")   # as a driver raises when its socket ends
    return data


def test_a_round_trip_nothing_answers_is_cut_off_at_its_deadline_and_the_database_refused_for_a_moment():
    dog = Watchdog(tick=0.01)
    ours, server = socket.socketpair()
    with ours, server:
        with pytest.raises(DatabaseHung, match=r"did not answer within 0.2 s \(a statement\)") as raised:
            with dog.watch(ours.fileno(), 0.2, breaker_seconds=30, what="a statement"):
                _read(ours)   # blocks: the "server" never answers
        assert isinstance(raised.value, OperationalError)   # what the API answers as its JSON 503
        assert dog.expiries == 1
        assert ours.fileno() >= 0   # shut down, not closed: its owner closes the fd
        with pytest.raises(DatabaseHung, match="a moment ago; a new connection is not tried"):
            with dog.watch(server.fileno(), 10, breaker_seconds=30, what="a new connection"):
                pass


def test_a_round_trip_answered_in_time_is_left_alone_and_the_breaker_closes_after_its_time():
    dog = Watchdog(tick=0.01)
    ours, server = socket.socketpair()
    with ours, server:
        server.sendall(b"answer")
        with dog.watch(ours.fileno(), 0.2, breaker_seconds=30, what="a statement"):
            assert _read(ours) == b"answer"
        time.sleep(0.3)   # past the deadline the round trip had: it is no longer watched
        server.sendall(b"again")
        assert _read(ours) == b"again" and dog.expiries == 0
        dog.hung(0.05)
        with pytest.raises(DatabaseHung):
            dog.refuse_if_hung("a statement")
        time.sleep(0.1)
        dog.refuse_if_hung("a statement")   # closed again: no exception


def test_the_deadline_is_the_contexts_and_the_backend_is_chosen_with_the_database():
    assert query_deadline.seconds(7.0) == 7.0
    with query_deadline.deadline_for(2.5):
        assert query_deadline.seconds(7.0) == 2.5
    assert query_deadline.seconds(7.0) == 7.0
    config = DatabaseConfig.from_env({"DATABASE_STATEMENT_TIMEOUT_SECONDS": "10"})
    assert config.query_deadline_seconds == 12.0   # above the server's own timeout, so it cancels first
    assert DatabaseConfig.from_env({"DATABASE_STATEMENT_TIMEOUT_SECONDS": "0"}).query_deadline_seconds == 0
    assert config.engine(POSTGRESQL) == DEADLINED_POSTGRESQL and config.engine(SQLITE) == SQLITE
    if connection.vendor == "postgresql":   # the running hub's connection goes through it
        assert settings.DATABASES["default"]["ENGINE"] == DEADLINED_POSTGRESQL


@pytest.mark.django_db
def test_statements_sent_together_each_get_the_deadline_and_are_not_taken_for_a_hung_database():
    # An executemany is one round trip whose statements the server runs in turn, each within its own
    # timeouts (a usage flush waiting on rows another process holds). Three statements of 0.4 s under
    # a 0.6 s deadline were cut off, and the breaker then refused every request of the process.
    if connection.vendor != "postgresql":
        pytest.skip("the round-trip deadline is the PostgreSQL backend's")
    expiries = query_deadline.watchdog.expiries
    with query_deadline.deadline_for(0.6), connection.cursor() as cursor:
        started = time.monotonic()
        cursor.executemany("SELECT pg_sleep(%s)", iter([(0.4,)] * 3))   # any iterable, as Django takes
        took = time.monotonic() - started
        cursor.execute("SELECT 1")   # the breaker did not open
        assert cursor.fetchone() == (1,)
    assert took >= 1.2 and query_deadline.watchdog.expiries == expiries
    try:
        with query_deadline.deadline_for(0.6), connection.cursor() as cursor:   # one statement: still cut off
            with pytest.raises(DatabaseHung):
                cursor.execute("SELECT pg_sleep(2)")
        assert query_deadline.watchdog.expiries == expiries + 1
    finally:
        query_deadline.watchdog.hung_until = 0.0   # the breaker it opened, closed for the tests after
        connection.close()

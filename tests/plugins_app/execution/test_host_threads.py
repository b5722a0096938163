"""The host threads' database connections (services/execution/async_host_bridge.py): a connection used
moments ago is not health-checked again before the next host call, one left idle is."""

import time

import pytest
from django.db import connection

from plugins_app.services.execution import async_host_bridge
from plugins_app.services.execution.async_host_bridge import _with_connection


def _check_pending() -> bool:
    """Whether Django would health-check the connection before this call's first statement."""
    pending = not connection.health_check_done
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return pending


@pytest.mark.django_db(transaction=True)   # no test transaction around: a host thread has none
def test_a_connection_used_moments_ago_is_not_checked_again_but_an_idle_one_is(monkeypatch):
    monkeypatch.setattr(async_host_bridge, "FRESH_CONNECTION_SECONDS", 0.3)
    connection.ensure_connection()
    _with_connection(_check_pending)             # whatever the first finds, it marks the connection used
    assert _with_connection(_check_pending) is False   # right after: no check
    assert _with_connection(_check_pending) is False
    time.sleep(0.4)                              # idle past FRESH_CONNECTION_SECONDS
    assert _with_connection(_check_pending) is True


@pytest.mark.django_db(transaction=True)   # no test transaction around: a host thread has none
def test_a_connection_that_failed_is_replaced_before_the_next_call():
    connection.ensure_connection()
    _with_connection(_check_pending)
    first = connection.connection

    def fails():
        connection.errors_occurred = True   # as Django marks a connection a statement failed on
        connection.close()                  # ...which the database then dropped
    _with_connection(fails)
    _with_connection(_check_pending)
    assert connection.connection is not None and connection.connection is not first

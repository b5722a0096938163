"""Fixtures for the observability tests."""

import time

import pytest

# Longer than any of these tests takes: one started clear of a minute's end records within that minute.
MINUTE_MARGIN_SECONDS = 5.0


@pytest.fixture
def within_one_minute():
    """For tests whose recorded runs must fall in one minute (so in one hour and one day, which end on a
    minute's end too): they start clear of a minute's last seconds, never across a turn of the clock."""
    left = 60 - time.time() % 60
    if left < MINUTE_MARGIN_SECONDS:
        time.sleep(left + 0.05)

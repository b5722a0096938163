"""PostgreSQL away for a few seconds under load (issue 29, item 4: 7,304 HTML 500s in 10 s before): every
answer is a vetoed 200 or the API's JSON 503 with Retry-After, the hub recovers, and every cancelled
answer has its row. Runs where DATABASE_URL names PostgreSQL (CI's second suite run); the relay between
the hub and the database is what is cut, so the shared server itself is never stopped."""

from __future__ import annotations

import os
import time
from urllib.parse import urlparse

import psycopg
import pytest

from .cluster import Hub, Load, figures
from .tcp_cut import TcpCut
from .test_faults import STEADY, _assert_clean

pytestmark = [pytest.mark.integration, pytest.mark.slow]
OUTAGE_SECONDS = 3


def _postgres_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        if os.environ.get("HUB_TEST_POSTGRES"):
            pytest.fail("HUB_TEST_POSTGRES is set but DATABASE_URL does not name a PostgreSQL database")
        pytest.skip("the database outage needs PostgreSQL (DATABASE_URL=postgresql://...): SQLite is a file "
                    "opened by the hub's own processes, with no server to lose")
    return url


@pytest.fixture(scope="module")
def hub_on_postgres(tmp_path_factory):
    url = urlparse(_postgres_url())
    name = f"hub_faults_{os.getpid()}"
    with psycopg.connect(url.geturl(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    relay = TcpCut((url.hostname or "127.0.0.1", url.port or 5432)).start()
    auth = url.netloc.rsplit("@", 1)[0] + "@" if "@" in url.netloc else ""
    hub = Hub(tmp_path_factory.mktemp("pg-faults"), with_celery=False,
              database_url=url._replace(netloc=f"{auth}127.0.0.1:{relay.port}", path=f"/{name}").geturl())
    yield hub, relay
    hub.stop()
    relay.cut()
    with psycopg.connect(url.geturl(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_database_outage_answers_json_503_with_retry_after_and_loses_no_row(hub_on_postgres):
    hub, relay = hub_on_postgres
    rows_before = hub.cancel_rows()
    with Load(hub) as load:
        load.wait_for_answers(STEADY, 0)
        fault = time.monotonic()
        relay.cut()
        time.sleep(OUTAGE_SECONDS)
        relay.start()
        load.wait_for_answers(STEADY, time.monotonic())
    cancelled = sum(a.status == 200 and a.outcome == "cancelled" for a in load.answers)
    rows = hub.cancel_rows() - rows_before
    row = figures(f"postgres away {OUTAGE_SECONDS} s", load.answers, fault, **{"rows lost": cancelled - rows})
    _assert_clean(row, load.answers)
    assert row["503"] > 0   # the outage was seen, and answered in the API's shape
    assert all(a.retry_after == "5" for a in load.answers if a.status == 503)
    assert rows == cancelled

"""host.kv.incr under real concurrency: two web processes, eight callers each, on one database (SQLite or
the PostgreSQL of DATABASE_URL), every step counted exactly once."""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
from collections import Counter

import psycopg
import pytest

from ..serving import Served

PROCESSES, THREADS, CALLS = 2, 8, 500
COUNTER = """globalThis.middleware.systemPrompt = async () => String(await host.kv.incr('hits'));"""
PROMPT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "base"}


@pytest.fixture
def database_url(tmp_path):
    """A database of its own for the served processes: SQLite in a temp file, or on PostgreSQL (when the
    tests run on it) a fresh database beside the test database."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        yield f"sqlite:///{tmp_path / 'served.sqlite3'}"
        return
    parts = urllib.parse.urlsplit(url)
    name = parts.path.lstrip("/") + "_kv_served"
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield parts._replace(path="/" + name).geturl()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_incr_from_two_web_processes_counts_every_step_once(database_url):
    servers = [Served(workers=1) for _ in range(PROCESSES)]
    try:
        for server in servers:
            # One database; usage written in batches, as a deployment does, not once per call. No load
            # shedding: this counts steps, and on a loaded machine a call queued past 1 s would be a 503.
            server.env.update(DATABASE_URL=database_url, HUB_METERING_FLUSH_SECONDS="5",
                              HUB_EXECUTE_QUEUE_DEADLINE_MS="0")
            server.start()
        first = servers[0]
        auth = {"Authorization": "Bearer " + first.manage("create_api_key", "acme").strip().splitlines()[-1]}
        status, _, body = first.request("POST", "/api/v1/plugins", {
            "name": "counter", "source": COUNTER, "language": "javascript", "grant": ["host:kv"]}, auth)
        assert status == 201, body
        answers: Counter = Counter()
        failures: list = []
        lock = threading.Lock()

        def caller(server: Served) -> None:
            for _ in range(CALLS):
                status, _, raw = server.request("POST", "/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, auth)
                with lock:
                    if status == 200:
                        answers[json.loads(raw)["value"]] += 1
                    else:
                        failures.append((status, raw[:200]))

        threads = [threading.Thread(target=caller, args=(server,)) for server in servers for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        total = PROCESSES * THREADS * CALLS
        assert failures == []
        # Every caller saw a different value, and together they are 1 to 8,000: no step lost or doubled.
        assert sorted(int(v) for v in answers) == list(range(1, total + 1))
        assert max(answers.values()) == 1
        status, _, raw = first.request("POST", "/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, auth)
        assert json.loads(raw)["value"] == str(total + 1)
    finally:
        for server in servers:
            server.stop()

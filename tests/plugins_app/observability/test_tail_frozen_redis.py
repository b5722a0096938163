"""A frozen Redis (SIGSTOP) under the live tail (issue 40, item 2: 25 execute calls answered in 20 s, each
waiting out redis-py's timeout in the tail's check): execute calls never wait on it, the breaker stops
asking it, and once it runs again (SIGCONT) the tail carries events again."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import replace

import pytest

from plugins_app.services.observability import tail
from plugins_app.services.observability.redis_guard import Breaker
from tests.integration.celery_services import _pings, _require_redis_server, free_port, wait_until

from ..conftest import PROMPT, appender

EXECUTE = "/api/v1/hooks/systemPrompt/execute"
TIMEOUT_SECONDS = 2.0   # the tail's Redis timeout here: a call that waited on Redis would take at least this


def test_the_breaker_opens_on_a_failure_half_opens_after_its_cool_down_and_closes_on_success():
    now = [0.0]
    breaker = Breaker(5.0, clock=lambda: now[0])
    assert breaker.allow() and breaker.closed
    breaker.failed()
    assert not breaker.allow() and not breaker.may_ask()
    now[0] = 5.0
    assert breaker.may_ask() and breaker.allow()   # half-open: one probe
    assert not breaker.allow()                      # and only one
    breaker.failed()
    now[0] = 9.0
    assert not breaker.allow()                      # open again, a new cool-down
    now[0] = 10.0
    assert breaker.allow()
    breaker.succeeded()
    assert breaker.closed and breaker.allow() and breaker.allow()


@pytest.fixture
def frozen_redis(tmp_path):
    binary, port = _require_redis_server(), free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_until(lambda: _pings(url), 30, "redis-server to answer PING")
        yield proc, url
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait(10)


@pytest.mark.integration
@pytest.mark.django_db
def test_a_frozen_redis_never_holds_an_execute_call_and_the_tail_comes_back(frozen_redis, settings, api_client,
                                                                             install, account):
    proc, url = frozen_redis
    settings.HUB_TAIL = replace(settings.HUB_TAIL, channel="redis", redis_url=url,
                                redis_timeout_seconds=TIMEOUT_SECONDS, redis_retry_seconds=1.0)
    tail.reset_channel()
    install(appender("!"))
    channel = tail.get_channel()
    subscription = channel.subscribe(account.pk)   # someone tails the account: every run is published
    try:
        def call() -> float:
            started = time.monotonic()
            assert api_client.post(EXECUTE, {"context": PROMPT}, format="json").status_code == 200
            return time.monotonic() - started

        def tailed(since: float) -> bool:
            """A run made now reaches the stream (a publish Redis took before it froze arrives late:
            only runs made after `since` count)."""
            call()
            return any(e.get("type") == "run" and e["at"] >= since for e in subscription.read(0.2))

        wait_until(lambda: tailed(0), 30, "a run's events on the tail")
        os.kill(proc.pid, signal.SIGSTOP)
        frozen: list[float] = []
        wait_until(lambda: frozen.append(call()) or not channel.sender.breaker.closed, 60,
                   "the tail's publisher to give the frozen Redis up")
        frozen += [call() for _ in range(10)]   # the breaker open: not even asked
        assert max(frozen) < TIMEOUT_SECONDS, frozen   # no call waited on Redis
        os.kill(proc.pid, signal.SIGCONT)
        resumed = time.time()
        wait_until(lambda: tailed(resumed), 30, "the tail to carry events again")
        wait_until(lambda: channel.sender.breaker.closed, 10, "the breaker to close")
    finally:
        subscription.close()
        tail.reset_channel()

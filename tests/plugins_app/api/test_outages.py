"""A part that is away answers the API's JSON error with 503 and Retry-After, never Django's HTML 500
(issue 29, items 2 and 4): no hook engine to take a call, and the database not answering."""

import os
import signal

import pytest
from django.db import InterfaceError, OperationalError

from plugins_app.api.errors import DATABASE_RETRY_SECONDS, ENGINE_RETRY_SECONDS, exception_handler
from plugins_app.runtime.engine.supervisor import Supervisor
from plugins_app.runtime.web.tier import EngineSilent, tier_for
from plugins_app.services.engine import tier as engine_tier
from plugins_app.services.execution import quarantine

from ..conftest import PROMPT, appender


def test_execute_with_no_engine_answering_is_a_json_503_with_retry_after(api_client, install, monkeypatch, tmp_path):
    install(appender("!"))
    gone = Supervisor(tmp_path / "engines", engines=1, lane=0).start()
    dead_tier = tier_for(gone.describe())
    gone.stop()   # its sockets are closed: as after a kill -9 of gunicorn's supervisor
    monkeypatch.setattr(engine_tier, "_tier", dead_tier)
    response = api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json")
    assert response.status_code == 503
    assert response["Content-Type"].startswith("application/json")
    assert response["Retry-After"] == str(ENGINE_RETRY_SECONDS)
    error = response.json()["error"]
    assert error["code"] == "unavailable" and error["retryAfter"] == ENGINE_RETRY_SECONDS
    assert "nothing ran" in error["message"]


def test_execute_on_a_frozen_engine_is_a_json_503_and_strikes_no_plugin(api_client, install, monkeypatch, tmp_path):
    # Issue 40: a silent engine is a part's fault. Its (only) engine is stopped with SIGSTOP: the call
    # is answered 503 once its pulse has been quiet for a second and a half, and the engine is left
    # alone (no web process kills it), its plugin unstruck.
    installation = install(appender("!"))
    supervisor = Supervisor(tmp_path / "engines", engines=1, lane=0, hung_seconds=60).start()
    tier = tier_for(supervisor.describe())
    monkeypatch.setattr(engine_tier, "_tier", tier)
    monkeypatch.setattr(engine_tier, "_async_tier", None)
    try:
        pid = tier.ping(tier.engines[0])["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            response = api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json")
        finally:
            os.kill(pid, signal.SIGCONT)
        assert response.status_code == 503, response.content
        assert response["Retry-After"] == str(ENGINE_RETRY_SECONDS)
        assert "the hook engine stopped answering" in response.json()["error"]["message"]
        installation.refresh_from_db()
        assert quarantine.status(installation)["strikes"] == 0
        assert tier.ping(tier.engines[0])["pid"] == pid and supervisor.restarts() == 0   # thawed, never killed
    finally:
        tier.shutdown()
        supervisor.stop()


@pytest.mark.parametrize("started", [True, False])
def test_a_silent_engine_says_whether_the_chain_may_have_run(started):
    response = exception_handler(EngineSilent(started=started), {})
    assert response.status_code == 503 and response["Retry-After"] == str(ENGINE_RETRY_SECONDS)
    message = response.data["error"]["message"]
    assert ("whether the chain ran is unknown" in message) is started and ("nothing ran" in message) is not started


@pytest.mark.parametrize("exc", [OperationalError("server closed the connection unexpectedly"),
                                 InterfaceError("connection already closed")])
def test_a_database_error_becomes_the_typed_503(exc):
    response = exception_handler(exc, {})
    assert response.status_code == 503
    assert response["Retry-After"] == str(DATABASE_RETRY_SECONDS)
    assert response.data["error"]["code"] == "unavailable"
    assert response.data["error"]["message"] == "the database is not answering; send the call again shortly"


def test_a_503_answer_is_not_logged_per_call(api_client, install, monkeypatch, tmp_path, caplog):
    # The handler logs an outage once per 10 s; Django's one line per 5xx would flood the log.
    import logging

    from middleware_hub.log_filters import OutageAnswersOnce

    install(appender("!"))
    gone = Supervisor(tmp_path / "engines", engines=1, lane=0).start()
    dead_tier = tier_for(gone.describe())
    gone.stop()
    monkeypatch.setattr(engine_tier, "_tier", dead_tier)
    with caplog.at_level(logging.ERROR, logger="django.request"):
        for _ in range(3):
            assert api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT},
                                   format="json").status_code == 503
    logged = [r for r in caplog.records if r.name == "django.request"]
    assert len(logged) == 3 and not any(OutageAnswersOnce().filter(r) for r in logged)


def test_other_errors_are_left_to_django():
    assert exception_handler(ZeroDivisionError("a bug"), {}) is None   # a bug is still a 500, logged with its traceback

"""POST /api/v1/hooks/{hook}/execute: the chain through HTTP, and every way a request can be wrong."""

import json

import pytest

from plugins_app.models import CancelLog, HandlerWarning, UsageDaily
from plugins_app.runtime.tables.hooks import HOOKS

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

INBOUND = {"sessionId": "10", "channelId": None, "text": "hi", "mediaIds": []}


def execute(client, hook, context, **extra):
    return client.post(f"/api/v1/hooks/{hook}/execute", {"context": context, **extra}, format="json")


def test_execute_runs_the_chain_and_reports_a_trace(api_client, install):
    a, b = install(appender("A")), install(appender("B"))
    response = execute(api_client, "systemPrompt", PROMPT)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["hook"] == "systemPrompt"
    assert body["outcome"] == "changed"
    assert body["value"] == "baseAB"
    assert body["cancellation"] is None
    assert [t["installationId"] for t in body["trace"]] == [str(a.pk), str(b.pk)]
    assert all(isinstance(t["durationMs"], float) for t in body["trace"])
    assert response["Server-Timing"].startswith("chain;dur=")
    assert float(response["Server-Timing"].split(",")[0].split("dur=")[1]) > 0
    assert [t["status"] for t in body["trace"]] == ["ran", "ran"]


def test_no_plugins_means_unchanged_with_an_empty_trace(api_client):
    body = execute(api_client, "systemPrompt", PROMPT).json()
    assert body == {"hook": "systemPrompt", "outcome": "unchanged", "value": "base", "cancellation": None,
                    "trace": [], "effects": []}


def test_cancel_is_answered_and_audited(api_client, install, account):
    veto = install("globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('blocked: ' + c.text);",
                   name="vetoer")
    body = execute(api_client, "userMessageInbound", INBOUND, turnId="t-1").json()
    assert body["outcome"] == "cancelled"
    assert body["cancellation"] == {"installationId": str(veto.pk), "plugin": "vetoer", "reason": "blocked: hi"}
    log = CancelLog.objects.get(account=account)
    assert (log.hook, log.plugin_slug, log.reason, log.session_id, log.turn_id) == (
        "userMessageInbound", "vetoer", "blocked: hi", "10", "t-1")
    assert log.context["text"] == "hi"
    assert log.plugin_id == veto.plugin_id


def test_warnings_are_recorded_for_failed_handlers(api_client, install, account):
    install("globalThis.middleware.systemPrompt = async () => { throw new TypeError('nope'); };", name="thrower")
    install("globalThis.middleware.systemPrompt = async () => 42;", name="wrong")
    body = execute(api_client, "systemPrompt", PROMPT).json()
    assert [t["status"] for t in body["trace"]] == ["error", "malformed"]
    assert body["value"] == "base"
    kinds = sorted(HandlerWarning.objects.filter(account=account).values_list("plugin_slug", "kind"))
    assert kinds == [("thrower", "error"), ("wrong", "malformed")]
    listed = api_client.get("/api/v1/warnings?kind=error").json()
    assert [w["plugin"] for w in listed["results"]] == ["thrower"]


def test_metering_counts_only_handlers_that_ran(api_client, install, account):
    install(appender("A"), name="a")
    install("globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('x');", name="veto")
    install("globalThis.middleware.userMessageInbound = async (c) => c.text;", name="after")
    execute(api_client, "systemPrompt", PROMPT)
    execute(api_client, "systemPrompt", PROMPT)
    execute(api_client, "userMessageInbound", INBOUND)
    rows = {(u.plugin_slug, u.hook): u.runs for u in UsageDaily.objects.filter(account=account)}
    assert rows == {("a", "systemPrompt"): 2, ("veto", "userMessageInbound"): 1}


def test_a_64_bit_id_survives_the_round_trip(api_client, install):
    install("globalThis.middleware.systemPrompt = async (c) => c.sessionId;")
    body = execute(api_client, "systemPrompt", dict(PROMPT, sessionId="18446744073709551615")).json()
    assert body["value"] == "18446744073709551615"


def test_unknown_hook_is_404_naming_the_hooks(api_client):
    response = execute(api_client, "systemPrompts", PROMPT)
    assert response.status_code == 404
    error = response.json()["error"]
    assert "systemPrompts" in error["message"]
    assert len(error["hooks"]) == len(HOOKS) and "cronJobCompleted" in error["hooks"]


@pytest.mark.parametrize("context, field", [
    ({k: v for k, v in PROMPT.items() if k != "systemPrompt"}, "context.systemPrompt"),
    (dict(PROMPT, systemPrompt=5), "context.systemPrompt"),
    (dict(PROMPT, extra="x"), "context.extra"),
    (dict(PROMPT, sessionKind=None), "context.sessionKind"),
])
def test_bad_context_fields_are_named(api_client, context, field):
    response = execute(api_client, "systemPrompt", context)
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field


def test_an_id_sent_as_a_number_is_refused(api_client):
    response = execute(api_client, "systemPrompt", dict(PROMPT, sessionId=18446744073709551615))
    assert response.status_code == 400
    assert "ids are strings" in response.json()["error"]["message"]


def test_bad_hop_is_400(api_client):
    assert execute(api_client, "systemPrompt", PROMPT, hop="2").status_code == 400
    assert execute(api_client, "systemPrompt", PROMPT, hop=-1).status_code == 400


def test_a_body_over_1_mib_is_413_and_changes_nothing(api_client, install, account):
    install("globalThis.middleware.systemPrompt = async (c, t) => c.systemPrompt;")
    body = json.dumps({"context": dict(PROMPT, systemPrompt="x" * (1024 * 1024 + 10))})
    response = api_client.post("/api/v1/hooks/systemPrompt/execute", body, content_type="application/json")
    assert response.status_code == 413
    assert UsageDaily.objects.filter(account=account).count() == 0


@pytest.mark.parametrize("body, field", [
    ([{"context": PROMPT}], "body"),
    ("just text", "body"),
    ({"ctx": PROMPT}, "context"),
    ({"context": PROMPT, "turnId": 7}, "turnId"),
])
def test_a_malformed_body_is_400_naming_what_is_wrong(api_client, install, account, body, field):
    install("globalThis.middleware.systemPrompt = async (c, t) => c.systemPrompt + '!';")
    response = api_client.post("/api/v1/hooks/systemPrompt/execute", json.dumps(body),
                               content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field
    assert UsageDaily.objects.filter(account=account).count() == 0


def test_an_unknown_hook_is_404_even_when_the_body_is_wrong_too(api_client):
    response = api_client.post("/api/v1/hooks/nope/execute", "[]", content_type="application/json")
    assert response.status_code == 404


def test_invalid_json_is_400(api_client):
    response = api_client.post("/api/v1/hooks/systemPrompt/execute", "{nope", content_type="application/json")
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]["message"]


def test_no_key_or_a_bad_key_is_401(client):
    assert client.post("/api/v1/hooks/systemPrompt/execute", {}, content_type="application/json").status_code == 401
    response = client.get("/api/v1/hooks", HTTP_AUTHORIZATION="Bearer mh_nothere_" + "x" * 32)
    assert response.status_code == 401


def test_each_account_runs_only_its_own_plugins(api_client, other_api_client, install, other_account):
    install(appender("mine"))
    install(appender("theirs"), target=other_account)
    assert execute(api_client, "systemPrompt", PROMPT).json()["value"] == "basemine"
    assert execute(other_api_client, "systemPrompt", PROMPT).json()["value"] == "basetheirs"


def test_hooks_list_serves_the_table(api_client):
    hooks = {h["name"]: h for h in api_client.get("/api/v1/hooks").json()["hooks"]}
    assert len(hooks) == len(HOOKS)
    assert hooks["systemPrompt"]["cancellable"] is False
    assert hooks["notifyScheduled"]["mutable"] == ["message", "delaySeconds"]
    assert hooks["sessionClearing"]["observeOnly"] is True
    assert hooks["sshCommandSending"]["carriesAgent"] is True
    assert hooks["userMessageInbound"]["carriesAgent"] is False


@pytest.mark.slow
def test_the_api_gives_each_handler_five_seconds_then_goes_on(api_client, install):
    import time
    install("globalThis.middleware.systemPrompt = async () => new Promise(() => {});", name="never")
    install(appender("!"), name="after")
    started = time.monotonic()
    body = execute(api_client, "systemPrompt", PROMPT).json()
    elapsed = time.monotonic() - started
    assert [t["status"] for t in body["trace"]] == ["timeout", "ran"]
    assert "5000 ms" in body["trace"][0]["warning"]
    assert body["value"] == "base!"
    assert 5.0 <= elapsed < 30   # the wall-clock budget, not a shorter one; and the chain did go on

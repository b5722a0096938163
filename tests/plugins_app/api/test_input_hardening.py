"""Inputs that answered 500 (issue 12): text that is not valid Unicode or holds NUL, deep nesting, ids in
every form, and the one error shape; and unknown body fields, which were silently dropped."""

import json

import pytest
from django.urls import URLPattern, reverse
from rest_framework.test import APIClient

from plugins_app.api import urls as api_urls
from plugins_app.errors import InvalidInput
from plugins_app.models import Agent, CronJob, Installation, PlatformConfig, SshHost
from plugins_app.services import inputs
from plugins_app.services.ids import MAX_ID, parse_id

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

EXECUTE = "/api/v1/hooks/systemPrompt/execute"
INBOUND = {"sessionId": "1", "channelId": None, "text": "hi", "mediaIds": []}
# Methods that take no body: the body, if any, is never read.
BODILESS = {("ping", "POST"), ("cron-job-run", "POST"), ("plugin-release", "POST"), ("plugin-promote", "POST")}


def post_raw(client, url, raw: str, method="post"):
    return getattr(client, method)(url, raw, content_type="application/json")


def error_of(response) -> dict:
    error = response.json()["error"]
    assert {"code", "message", "field"} <= set(error), error
    return error


# --- text ----------------------------------------------------------------------------------------

def test_a_lone_surrogate_in_the_context_is_400_naming_the_field(api_client, install, account):
    install("globalThis.middleware.userMessageInbound = async (c) => c.text + '!';")
    raw = json.dumps({"context": {**INBOUND, "text": "x\ud800"}})    # json.dumps escapes it as \ud800
    response = post_raw(api_client, "/api/v1/hooks/userMessageInbound/execute", raw)
    assert response.status_code == 400
    assert error_of(response)["field"] == "context.text"
    assert "surrogate" in error_of(response)["message"]


def test_a_valid_surrogate_pair_is_text(api_client, install):
    install("globalThis.middleware.userMessageInbound = async (c) => c.text + '!';")
    raw = json.dumps({"context": {**INBOUND, "text": "x\U0001F600"}})
    response = post_raw(api_client, "/api/v1/hooks/userMessageInbound/execute", raw)
    assert response.status_code == 200, response.json()
    assert response.json()["value"] == "x\U0001F600!"


def test_nul_in_an_agent_name_is_400_and_nothing_is_stored(api_client):
    response = api_client.put("/api/v1/agents/7", {"name": "bad\x00name"}, format="json")
    assert response.status_code == 400
    assert error_of(response)["field"] == "name"
    assert not Agent.objects.exists()


def test_a_bad_key_is_named_too(api_client):
    response = post_raw(api_client, EXECUTE, '{"context": {"a\\u0000b": 1}}')
    assert response.status_code == 400
    assert error_of(response)["field"] == "context.a\\u0000b"


@pytest.mark.parametrize("path, body", [
    ("/api/v1/platform", {"baseUrl": "http://127.0.0.1:9/\x00", "signingSecret": "s"}),
    ("/api/v1/chains/systemPrompt", {"order": ["\udfff"]}),
    ("/api/v1/plugins/1/grant", {"grant": ["host:\x00"]}),
])
def test_bad_text_is_refused_before_any_service(api_client, path, body):
    method = "post" if path.endswith("grant") else "put"
    response = post_raw(api_client, path, json.dumps(body), method)
    assert response.status_code == 400, response.content
    assert error_of(response)["code"] == "invalid"
    assert not PlatformConfig.objects.exists()


@pytest.mark.parametrize("query, field", [
    ("plugin=a%00b", "plugin"),
    ("hook=%ff", "hook"),
    ("level=info&installationId=%ed%a0%80", "installationId"),
])
def test_bad_text_in_a_query_parameter_is_400_naming_it(api_client, query, field):
    response = api_client.get(f"/api/v1/logs?{query}")
    assert response.status_code == 400
    assert error_of(response)["field"] == field


def test_raw_bytes_in_a_query_are_read_as_django_reads_them(api_client):
    response = api_client.get("/api/v1/logs", QUERY_STRING="installationId=\xc2\xb2")   # a raw "²"
    assert (response.status_code, error_of(response)["field"]) == (400, "installationId")
    response = api_client.get("/api/v1/logs", QUERY_STRING="plugin=\xff")
    assert (response.status_code, error_of(response)["field"]) == (400, "plugin")


def test_nul_in_a_path_parameter_is_400(api_client):
    response = api_client.get("/api/v1/agents/a%00b")
    assert response.status_code == 400
    assert error_of(response)["field"] == "agent_id"


# --- nesting ---------------------------------------------------------------------------------------

def body_operations():
    """(url name, url, method) of every API operation that reads a JSON body."""
    for pattern in api_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        view = pattern.callback.view_class
        kwargs = {name: ("systemPrompt" if name == "hook" else "1") for name in pattern.pattern.converters}
        for method in ("post", "put", "patch"):
            handler = getattr(view, method, None)
            if handler is None or (pattern.name, method.upper()) in BODILESS:
                continue
            assert getattr(handler, "request_body", None) is not None, \
                f"{view.__name__}.{method} reads a body: declare it with api.edge.body()"
            yield pattern.name, reverse(pattern.name, kwargs=kwargs), method


BODY_OPERATIONS = list(body_operations())


def test_every_body_operation_is_covered():
    assert len(BODY_OPERATIONS) >= 15


@pytest.mark.parametrize("name, url, method", BODY_OPERATIONS)
def test_a_deeply_nested_body_is_400_on_every_operation(api_client, name, url, method):
    response = post_raw(api_client, url, "[" * 100_000, method)
    assert response.status_code in (400, 413)
    assert error_of(response)["code"] in ("parse_error", "payload_too_large")


@pytest.mark.parametrize("name, url, method", BODY_OPERATIONS)
def test_an_unknown_field_is_400_on_every_operation(api_client, name, url, method):
    response = post_raw(api_client, url, json.dumps({"surelyNotAField": 1}), method)
    assert response.status_code == 400, response.content
    assert error_of(response)["field"] in ("surelyNotAField", "context", "enabled", "grant", "settings",
                                               "name", "agentId", "status", "sessionId", "kind", "message",
                                               "delaySeconds", "prompt", "schedule", "sshHostId", "turnId", "source", "version")


def test_nesting_up_to_the_limit_parses():
    assert not inputs.too_deep(b"[" * inputs.MAX_DEPTH + b"]" * inputs.MAX_DEPTH)
    assert inputs.too_deep(b"[" * (inputs.MAX_DEPTH + 1) + b"]" * (inputs.MAX_DEPTH + 1))
    assert not inputs.too_deep(json.dumps({"s": "[" * 1000}).encode())   # brackets inside strings


# --- ids -------------------------------------------------------------------------------------------

BAD_IDS = ["²", "99999999999999999999", str(MAX_ID + 1), "-1", "1.0", " 1", "1 ", "", "0x1", "١"]


@pytest.mark.parametrize("value", BAD_IDS)
def test_the_id_check_accepts_only_ascii_digits_in_range(value):
    with pytest.raises(InvalidInput) as caught:
        parse_id(value, "installationId")
    assert caught.value.extra["field"] == "installationId"


def test_the_id_check_accepts_the_whole_signed_range():
    assert parse_id(str(MAX_ID), "x") == MAX_ID
    assert parse_id("0", "x") == 0


@pytest.mark.parametrize("value", BAD_IDS[:6])
def test_a_bad_id_in_a_query_is_400(api_client, value):
    response = api_client.get("/api/v1/logs", {"installationId": value})
    assert response.status_code == 400
    assert error_of(response)["field"] == "installationId"


@pytest.mark.parametrize("value", ["%C2%B2", "99999999999999999999", "-1", "1.0", "%201"])
@pytest.mark.parametrize("prefix", ["plugins", "cron-jobs", "cron-runs", "notifications", "ssh-hosts"])
def test_a_bad_id_in_a_path_names_nothing(api_client, prefix, value):
    response = api_client.get(f"/api/v1/{prefix}/{value}")
    assert response.status_code == 404
    assert error_of(response)["field"].endswith("_id")


def test_a_valid_id_that_does_not_exist_stays_404(api_client):
    for url in ("/api/v1/plugins/9223372036854775807", "/api/v1/cron-jobs/5", "/api/v1/ssh-hosts/0"):
        response = api_client.get(url)
        assert response.status_code == 404
        assert error_of(response)["code"] == "not_found"


@pytest.mark.parametrize("value", ["²", "99999999999999999999", "-1"])
def test_a_bad_id_in_a_body_is_400(api_client, install, value):
    install(appender("!"))
    response = api_client.put("/api/v1/chains/systemPrompt", {"installationId": value, "position": 0},
                              format="json")
    assert response.status_code == 400
    assert error_of(response)["field"] == "installationId"
    response = api_client.post("/api/v1/ssh/execute", {
        "sessionId": "1", "agentId": "2", "sshHostId": value, "turnId": "t", "kind": "command",
        "command": "true"}, format="json")
    assert response.status_code == 400
    assert error_of(response)["field"] == "sshHostId"


# --- the error shape -------------------------------------------------------------------------------

def test_validation_errors_name_their_field(api_client):
    response = api_client.post("/api/v1/cron-jobs", {"agentId": "1", "name": "n", "prompt": "p",
                                                    "schedule": {"intervalSeconds": "often"}}, format="json")
    assert response.status_code == 400
    assert error_of(response)["field"] == "schedule.intervalSeconds"
    assert response.json()["error"]["code"] == "invalid"


def test_the_error_shape_on_401_404_405_413_415_and_parse_errors(api_client):
    cases = [
        (APIClient().get("/api/v1/ping"), 401, None),
        (api_client.get("/api/v1/plugins/123"), 404, None),
        (api_client.delete("/api/v1/ping"), 405, None),
        (post_raw(api_client, EXECUTE, json.dumps({"context": dict(PROMPT, systemPrompt="x" * (1 << 20))})),
         413, None),
        (api_client.post(EXECUTE, "context=1", content_type="text/plain"), 415, None),
        (post_raw(api_client, EXECUTE, "{nope"), 400, None),
        (api_client.get("/api/v1/hooks/nope/execute"), 405, None),
    ]
    for response, status, field in cases:
        assert response.status_code == status
        error = error_of(response)
        assert error["field"] == field, (status, error)
        assert isinstance(error["code"], str) and isinstance(error["message"], str)


# --- unknown fields --------------------------------------------------------------------------------

def test_an_unknown_platform_field_is_400_and_nothing_is_stored(api_client):
    response = api_client.put("/api/v1/platform", {"baseUrl": "http://127.0.0.1:9", "secret": "s"},
                              format="json")
    assert response.status_code == 400
    assert error_of(response)["field"] == "secret"
    assert 'unknown field' in error_of(response)["message"]
    assert not PlatformConfig.objects.exists()


def test_an_unknown_nested_field_is_named(api_client):
    response = api_client.post("/api/v1/cron-jobs", {"agentId": "1", "name": "n", "prompt": "p",
                                                    "schedule": {"intervalSeconds": 60, "every": 5}}, format="json")
    assert response.status_code == 400
    assert error_of(response)["field"] == "schedule.every"
    assert not CronJob.objects.exists()


def test_unknown_fields_on_install_and_ssh_hosts(api_client):
    response = api_client.post("/api/v1/plugins", {"name": "x", "source": "1", "langauge": "javascript"},
                               format="json")
    assert (response.status_code, error_of(response)["field"]) == (400, "langauge")
    assert not Installation.objects.exists()
    response = api_client.post("/api/v1/ssh-hosts", {"displayName": "d", "password": "p"}, format="json")
    assert (response.status_code, error_of(response)["field"]) == (400, "password")
    assert not SshHost.objects.exists()


def test_execute_still_takes_every_documented_field(api_client, install):
    install(appender("!"))
    body = {"context": PROMPT, "hop": 1, "turnId": "t", "conversation": {"messages": []}}
    response = api_client.post(EXECUTE, body, format="json")
    assert response.status_code == 200, response.json()


# --- try-it ----------------------------------------------------------------------------------------

TRY = reverse("admin:plugins_app_chainentry_try")


@pytest.mark.parametrize("context, says", [
    ('{"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "x\\ud800"}', "surrogate"),
    ('{"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "x\\u0000"}', "NUL"),
    ("[" * 100_000, "deeper"),
])
def test_try_it_shows_bad_input_as_a_form_error(login, account, install, context, says):
    install(appender("!"))
    client = login(account.name, "alice", "admin")
    response = client.post(TRY, {"account": account.pk, "hook": "systemPrompt", "context": context})
    assert response.status_code == 200
    assert response.context["run"] is None
    assert says in " ".join(response.context["form"].errors["context"])

"""POST /api/v1/hooks/{hook}/try: the account's chain on a sample, with chosen versions (drafts) swapped
in, and nothing written: no audit rows, strikes, lane moves or metering; execute answers as before."""

from dataclasses import replace

import pytest

from plugins_app.models import CancelLog, HandlerWarning, Installation, UsageDaily

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

INBOUND = {"sessionId": "10", "channelId": None, "text": "hi", "mediaIds": []}


def try_hook(client, hook, context, versions=None):
    body = {"context": context} if versions is None else {"context": context, "versions": versions}
    return client.post(f"/api/v1/hooks/{hook}/try", body, format="json")


def execute(client, hook, context):
    response = client.post(f"/api/v1/hooks/{hook}/execute", {"context": context}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def draft(client, installation, source):
    response = client.post(f"/api/v1/plugins/{installation.pk}/versions",
                           {"source": source, "language": "javascript"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["number"]


def test_a_draft_is_tried_in_its_place_and_the_live_chain_stays_as_it_was(api_client, install):
    first = install(appender("-a1"), name="first")
    install(appender("-b"), name="second")
    live_before = execute(api_client, "systemPrompt", PROMPT)
    number = draft(api_client, first, appender("-a2"))

    tried = try_hook(api_client, "systemPrompt", PROMPT, {str(first.pk): number})
    assert tried.status_code == 200, tried.content
    body = tried.json()
    assert body["value"] == "base-a2-b"
    assert body["versions"] == {str(first.pk): number}
    assert [(t["plugin"], t["version"], t["after"]) for t in body["trace"]] == [
        ("first", number, "base-a2"), ("second", 1, "base-a2-b")]
    assert body["trace"][0]["before"] == "base"

    live_after = execute(api_client, "systemPrompt", PROMPT)
    assert live_after["value"] == live_before["value"] == "base-a1-b"
    # The same handlers ran the same way (an engine event of another test, such as an isolate replaced
    # under a runaway, may add a warning of its own: not what this test is about).
    steps = lambda trace: [(t["installationId"], t["plugin"], t["status"], t["changed"]) for t in trace]
    assert steps(live_after["trace"]) == steps(live_before["trace"])
    assert Installation.objects.get(pk=first.pk).live_version == 1


def test_without_versions_it_tries_the_live_chain(api_client, install):
    install(appender("-x"))
    body = try_hook(api_client, "systemPrompt", PROMPT).json()
    assert body["value"] == "base-x" and body["versions"] == {}


def test_a_draft_hooking_a_new_point_joins_that_chain_only_in_the_try(api_client, install):
    plugin = install(appender("-p"), name="prompt only")
    number = draft(api_client, plugin, "globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('drafted');")
    body = try_hook(api_client, "userMessageInbound", INBOUND, {str(plugin.pk): number}).json()
    assert body["outcome"] == "cancelled" and body["cancellation"]["reason"] == "drafted"
    assert execute(api_client, "userMessageInbound", INBOUND)["outcome"] == "unchanged"
    assert try_hook(api_client, "systemPrompt", PROMPT, {str(plugin.pk): number}).json()["trace"] == []


def test_a_tried_run_writes_nothing(api_client, install, account, settings):
    settings.HUB_ENGINE = replace(settings.HUB_ENGINE, budget_ms=300)
    plugin = install(appender("-ok"), name="calm")
    failing = draft(api_client, plugin, "globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('no');"
                                        "\nglobalThis.middleware.systemPrompt = async () => { await null; while (true) {} };")
    for hook, context in (("userMessageInbound", INBOUND), ("systemPrompt", PROMPT)):
        assert try_hook(api_client, hook, context, {str(plugin.pk): failing}).status_code == 200
    plugin.refresh_from_db()
    assert plugin.strikes == [] and plugin.slow_lane_until is None and plugin.quarantined_until is None
    assert not CancelLog.objects.exists() and not HandlerWarning.objects.exists()
    assert not UsageDaily.objects.filter(account=account).exists()
    execute(api_client, "systemPrompt", PROMPT)   # the same chain, live: metered
    assert UsageDaily.objects.filter(account=account).exists()


@pytest.mark.parametrize("versions, status, field", [
    ({"999999": 1}, 404, "installation 999999 not found"),
    ("1", 400, "versions"),
    (None, 404, None),   # filled in below: a version the installation does not have
    ({"PLACEHOLDER": True}, 400, None),
])
def test_bad_versions_are_refused_naming_them(api_client, install, versions, status, field):
    plugin = install(appender("-x"))
    if versions is None:
        versions = {str(plugin.pk): 7}
    elif versions == {"PLACEHOLDER": True}:
        versions = {str(plugin.pk): True}
    response = try_hook(api_client, "systemPrompt", PROMPT, versions)
    assert response.status_code == status, response.content
    error = response.json()["error"]
    expected = field or f"versions.{plugin.pk}"
    assert error["field"] == expected or expected in error["message"]


def test_another_accounts_installation_is_not_found(api_client, other_api_client, install, other_account):
    theirs = install(appender("-theirs"), target=other_account)
    response = try_hook(api_client, "systemPrompt", PROMPT, {str(theirs.pk): 1})
    assert response.status_code == 404


def test_the_context_is_checked_as_execute_checks_it(api_client):
    response = try_hook(api_client, "systemPrompt", {"sessionId": "1"})
    assert response.status_code == 400
    assert response.json()["error"]["field"].startswith("context")
    assert try_hook(api_client, "nope", PROMPT).status_code == 404

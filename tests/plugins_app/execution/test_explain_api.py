"""POST /api/v1/hooks/{hook}/explain: each installation of the chain, in order, would run or why not."""

from datetime import timedelta

import pytest
from django.utils import timezone

from plugins_app.models import Installation
from plugins_app.services.execution import invoke as seam
from plugins_app.services.plugins import installations as plugins

from ..conftest import PROMPT

pytestmark = pytest.mark.django_db


def matcher_for(agent: str) -> str:
    return ("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '!';\n"
            f"globalThis.middleware.match = {{ systemPrompt: {{ agentId: {{ in: [{agent!r}] }} }} }};")


def explain(client, hook, context):
    return client.post(f"/api/v1/hooks/{hook}/explain", {"context": context}, format="json")


def test_explain_says_for_each_installation_whether_it_would_run_and_why_not(api_client, install, account,
                                                                            monkeypatch):
    plain = install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;", name="plain")
    mine = install(matcher_for("2"), name="mine")
    theirs = install(matcher_for("9"), name="theirs")
    off = install(matcher_for("2"), name="off")
    plugins.set_enabled(account, off.pk, False)
    held = install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;", name="held")
    Installation.objects.filter(pk=held.pk).update(quarantined_until=timezone.now() + timedelta(minutes=5),
                                                   quarantine_reason="3 timeouts")
    fetcher = install("globalThis.middleware.systemPrompt = async (c) => { await host.fetch('http://127.0.0.1/'); "
                      "return c.systemPrompt; };", name="fetcher")
    monkeypatch.setattr(seam, "get_tier", lambda: pytest.fail("explain runs nothing"))
    response = explain(api_client, "systemPrompt", PROMPT)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["hook"] == "systemPrompt" and body["runs"] == 3
    steps = {step["plugin"]: step for step in body["chain"]}
    assert [step["installationId"] for step in body["chain"]] == [
        str(i.pk) for i in (plain, mine, theirs, off, held, fetcher)]
    assert (steps["plain"]["runs"], steps["plain"]["reason"], steps["plain"]["matcher"]) == (True, None, None)
    assert (steps["mine"]["runs"], steps["mine"]["matcher"]) == (True, 'runs when agentId is one of "2"')
    assert (steps["theirs"]["runs"], steps["theirs"]["reason"]) == (False, "match")
    assert steps["theirs"]["detail"] == 'its matcher does not hold: wanted agentId is one of "9"; agentId is "2"'
    assert (steps["off"]["runs"], steps["off"]["reason"]) == (False, "disabled")
    assert (steps["held"]["runs"], steps["held"]["reason"]) == (False, "quarantined")
    assert "3 timeouts" in steps["held"]["detail"]
    assert (steps["fetcher"]["runs"], steps["fetcher"]["notGranted"]) == (True, ["host:fetch"])


def test_explain_ids_are_compared_as_strings(api_client, install):
    install(matcher_for("2"), name="mine")
    body = explain(api_client, "systemPrompt", {**PROMPT, "agentId": "2.0"}).json()
    assert body["chain"][0]["reason"] == "match"


def test_a_bad_context_or_hook_is_refused(api_client):
    bad = explain(api_client, "systemPrompt", {**PROMPT, "agentId": 2})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "context.agentId"
    missing = api_client.post("/api/v1/hooks/systemPrompt/explain", {}, format="json")
    assert missing.status_code == 400
    assert explain(api_client, "noSuchHook", PROMPT).status_code == 404


def test_another_accounts_chain_is_not_explained(other_api_client, install):
    install(matcher_for("2"), name="mine")
    assert explain(other_api_client, "systemPrompt", PROMPT).json() == {"hook": "systemPrompt", "runs": 0, "chain": []}

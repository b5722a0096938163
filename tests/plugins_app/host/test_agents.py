"""Agents registered by the platform, host.agents.list, and the spec's Oh My OpenAgents example."""

import json

import pytest

from plugins_app.models import Agent

from ..conftest import PROMPT
from .stubs import execute, reporter

pytestmark = pytest.mark.django_db

DOCTRINE = "\n\nYou may delegate to the crew."


def put_agent(client, agent_id, name, plugin=None):
    return client.put(f"/api/v1/agents/{agent_id}", {"name": name, "plugin": plugin}, format="json")


def test_put_registers_then_updates_an_agent(api_client, install):
    install(reporter("systemPrompt", "1"), name="crew-lead")
    created = put_agent(api_client, "18446744073709551615", "Scout", "crew-lead")
    assert created.status_code == 201, created.content
    assert created.json() == dict(created.json(), id="18446744073709551615", name="Scout", plugin="crew-lead")
    updated = put_agent(api_client, "18446744073709551615", "Scout II")
    assert updated.status_code == 200
    assert (updated.json()["name"], updated.json()["plugin"]) == ("Scout II", None)
    assert Agent.objects.count() == 1


def test_list_get_and_delete(api_client, install):
    install(reporter("systemPrompt", "1"), name="crew-lead")
    put_agent(api_client, "2", "Beta", "crew-lead")
    put_agent(api_client, "1", "Alpha")
    listed = api_client.get("/api/v1/agents").json()
    assert [(a["id"], a["plugin"]) for a in listed["results"]] == [("1", None), ("2", "crew-lead")]
    assert [a["id"] for a in api_client.get("/api/v1/agents?plugin=crew-lead").json()["results"]] == ["2"]
    assert api_client.get("/api/v1/agents/2").json()["name"] == "Beta"
    assert api_client.delete("/api/v1/agents/2").status_code == 204
    assert api_client.get("/api/v1/agents/2").status_code == 404
    assert api_client.delete("/api/v1/agents/2").status_code == 404


@pytest.mark.parametrize("body, field", [
    ({"name": "X", "plugin": "not-installed"}, "plugin"),
    ({"name": "X", "plugin": 5}, "plugin"),
    ({"name": ""}, "name"),
    ({"name": "x" * 201}, "name"),
    ({"plugin": None}, "name"),
])
def test_bad_input_is_a_400_naming_the_field_and_changes_nothing(api_client, body, field):
    put_agent(api_client, "7", "Kept")
    response = api_client.put("/api/v1/agents/7", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field
    assert api_client.get("/api/v1/agents/7").json()["name"] == "Kept"


def test_an_overlong_agent_id_is_refused(api_client):
    response = put_agent(api_client, "9" * 65, "X")
    assert (response.status_code, response.json()["error"]["field"]) == (400, "agentId")


def test_a_plugin_of_another_account_cannot_own_an_agent(api_client, other_api_client, install, other_account):
    install(reporter("systemPrompt", "1"), name="theirs", target=other_account)
    assert put_agent(api_client, "1", "X", "theirs").status_code == 400


def test_agents_are_per_account(api_client, other_api_client):
    put_agent(api_client, "1", "Mine")
    assert other_api_client.get("/api/v1/agents").json()["results"] == []
    assert other_api_client.get("/api/v1/agents/1").status_code == 404


def test_host_agents_list_returns_only_the_plugins_crew(api_client, install):
    install(reporter("systemPrompt", "host.agents.list()"), name="lead", grant=["host:agents"])
    install(reporter("userMessageInbound", "1"), name="other")
    put_agent(api_client, "11", "Zed", "lead")
    put_agent(api_client, "10", "Ann", "lead")
    put_agent(api_client, "12", "Not crew", "other")
    put_agent(api_client, "13", "Free")
    body = execute(api_client, "systemPrompt", PROMPT)
    assert json.loads(body["value"]) == {"ok": {"agents": [{"id": "10", "name": "Ann"}, {"id": "11", "name": "Zed"}]}}


def test_oh_my_openagents_gives_its_doctrine_only_outside_its_crew(api_client, install, examples):
    installation = install(examples.read("oh-my-openagents-systemPrompt.ts"), name="oh-my-openagents",
                           language="typescript", grant=["host:agents"])
    assert installation.plugin.permissions == ["host:agents"]
    put_agent(api_client, "18446744073709551615", "Sisyphus", "oh-my-openagents")
    put_agent(api_client, "500", "Outsider")

    crew = execute(api_client, "systemPrompt", dict(PROMPT, agentId="18446744073709551615"))
    outsider = execute(api_client, "systemPrompt", dict(PROMPT, agentId="500"))
    unknown = execute(api_client, "systemPrompt", dict(PROMPT, agentId="18446744073709551614"))
    assert (crew["outcome"], crew["value"]) == ("unchanged", "base")
    assert outsider["value"] == "base" + DOCTRINE
    assert unknown["value"] == "base" + DOCTRINE   # a neighbouring 64-bit id is not the crew member


def test_oh_my_openagents_without_its_grant_fails_open(api_client, install, examples):
    install(examples.read("oh-my-openagents-systemPrompt.ts"), name="oh-my-openagents", language="typescript")
    body = execute(api_client, "systemPrompt", PROMPT)
    assert body["value"] == "base"
    (trace,) = body["trace"]
    assert trace["status"] == "error"
    assert "host:agents" in trace["warning"]

"""Every host member's permission, derived at install and checked both ways through the execute API."""

import json
from dataclasses import replace

import pytest

from ..conftest import PROMPT, appender
from .stubs import LLMStub, StubServer, execute, json_answer, reporter

pytestmark = pytest.mark.django_db

# (host expression, the permission it derives, the ok value it yields once granted)
MEMBERS = [
    ("host.fetch(SITE).then((r) => r.status)", "host:fetch", 200),
    ("host.llm('hi')", "host:llm", "yes"),
    ("host.decide('ok?', ['yes', 'no'])", "host:decide", "yes"),
    ("host.agents.list()", "host:agents", {"agents": []}),
    ("host.session.peer.send('9', 'hi').then((r) => r.delivered)", "host:session", True),
    ("host.session.conversation.read()", "host:session", {"messages": []}),
    ("host.workspace.write('f', 'x')", "host:workspace", {"path": "f", "size": 1}),
    ("host.workspace.read('f')", "host:workspace", None),
    ("host.workspace.list()", "host:workspace", {"files": []}),
    ("host.workspace.delete('f')", "host:workspace", {"deleted": False}),
]


@pytest.fixture
def services(settings):
    site = StubServer(lambda req: json_answer(200, {}))
    llm = LLMStub("yes")
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)
    settings.HUB_HOST = replace(settings.HUB_HOST, llm_base_url=llm.url, llm_model="m")
    yield site
    site.close()
    llm.close()


@pytest.mark.parametrize("expression, permission, granted_value", MEMBERS,
                         ids=[m[0].split("(")[0] for m in MEMBERS])
def test_a_member_needs_its_permission(api_client, services, expression, permission, granted_value):
    source = reporter("systemPrompt", expression.replace("SITE", repr(services.url)))
    installed = api_client.post("/api/v1/plugins", {"name": "p", "source": source, "language": "javascript"},
                                format="json")
    assert installed.status_code == 201, installed.content
    assert (installed.json()["permissions"], installed.json()["granted"]) == ([permission], [])

    member = expression.split("(")[0]
    refused = json.loads(execute(api_client, "systemPrompt", PROMPT, conversation=[])["value"])
    assert refused == {"error": f"{member} needs the {permission} permission, which an account admin "
                                f"has not granted to p"}

    grant = api_client.post(f"/api/v1/plugins/{installed.json()['id']}/grant", {"grant": [permission]}, format="json")
    assert grant.status_code == 200 and grant.json()["granted"] == [permission]
    allowed = json.loads(execute(api_client, "systemPrompt", PROMPT, conversation=[])["value"])
    assert allowed == {"ok": granted_value}


def test_grant_on_install_and_only_what_the_plugin_asks_for(api_client):
    source = reporter("systemPrompt", "host.agents.list()")
    wrong = api_client.post("/api/v1/plugins", {"name": "p", "source": source, "language": "javascript",
                                                "grant": ["host:fetch"]}, format="json")
    assert wrong.status_code == 400 and wrong.json()["error"]["field"] == "grant"
    assert api_client.get("/api/v1/plugins").json()["plugins"] == []
    ok = api_client.post("/api/v1/plugins", {"name": "p", "source": source, "language": "javascript",
                                             "grant": ["host:agents"]}, format="json")
    assert ok.json()["granted"] == ["host:agents"]
    assert json.loads(execute(api_client, "systemPrompt", PROMPT)["value"]) == {"ok": {"agents": []}}


def test_log_and_config_need_no_permission(api_client, install):
    installation = install(reporter("systemPrompt", "(host.log('info', 'x'), typeof host.config)"))
    assert installation.plugin.permissions == []
    assert json.loads(execute(api_client, "systemPrompt", PROMPT)["value"]) == {"ok": "object"}


def test_a_refused_call_fails_open_and_the_chain_goes_on(api_client, install):
    install("globalThis.middleware.systemPrompt = async (c) => (await host.fetch('https://example.com')).status;",
            name="ungranted")
    install(appender("B"), name="next")
    body = execute(api_client, "systemPrompt", PROMPT)
    assert body["value"] == "baseB"
    assert [(t["plugin"], t["status"]) for t in body["trace"]] == [("ungranted", "error"), ("next", "ran")]
    assert "host:fetch" in body["trace"][0]["warning"]


def test_every_bridged_member_of_the_table_has_its_function_registered_at_start():
    from plugins_app.runtime.tables.members import BRIDGED_MEMBERS
    from plugins_app.services.execution.host_bridge import MEMBERS

    assert set(MEMBERS) == BRIDGED_MEMBERS


def test_a_member_missing_from_the_table_is_refused_when_declared():
    from plugins_app.services.execution.host_bridge import member

    with pytest.raises(ValueError, match="host.calendar.read is not a bridged member"):
        member("calendar.read")


def test_a_declared_member_without_a_function_stops_the_registration():
    from plugins_app.services.execution.host_bridge import MEMBERS, register_members

    saved = dict(MEMBERS)
    without_ssh = [fn for name, fn in saved.items() if name != "ssh.command"]
    with pytest.raises(ValueError, match="without a function: ssh.command"):
        register_members(without_ssh)
    assert MEMBERS == saved   # a refused registration leaves the bridge as it was

"""Replays and shadow runs act on nothing outside the hub (issue 33): every fetch (whatever its method),
llm, decide, platform read and SSH command is answered by a stand-in and reported; an account admin's
replay may make plain GET/HEAD fetches for real ("live reads"), and no other call."""

from dataclasses import replace

import pytest

from plugins_app.models import CancelLog
from plugins_app.runtime.tables.members import HOST_MEMBERS, OUTWARD_MEMBERS
from plugins_app.services.execution.host_bridge import STAND_INS

from ..host.stubs import LLMStub, StubServer, json_answer

pytestmark = pytest.mark.django_db

INBOUND = {"sessionId": "10", "channelId": None, "text": "rm -rf /", "mediaIds": []}
PROMPT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "base"}
# A plugin an auditor could replay to act on the world: a GET that says DELETE, a plain GET, an LLM call.
CALLER = """globalThis.middleware.userMessageInbound = async (c, t) => {{
  const override = await host.fetch('{site}/items/1', {{headers: {{'X-HTTP-Method-Override': 'DELETE'}}}});
  const plain = await host.fetch('{site}/items');
  const said = await host.llm('summarise: ' + c.text);
  return t.cancel(['override ' + override.status, 'plain ' + plain.status, 'llm ' + JSON.stringify(said)].join(', '));
}};"""


@pytest.fixture
def site(settings):
    server = StubServer(lambda req: json_answer(200, {"items": []}))
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)
    yield server
    server.close()


@pytest.fixture
def llm(settings):
    server = LLMStub("a summary")
    settings.HUB_HOST = replace(settings.HUB_HOST, llm_base_url=server.url + "/v1/", llm_api_key="sk-test",
                                llm_model="tiny-model")
    yield server
    server.close()


@pytest.fixture
def entry(api_client, install, site, llm):
    install(CALLER.format(site=site.url), name="caller", grant=["host:fetch", "host:llm"])
    response = api_client.post("/api/v1/hooks/userMessageInbound/execute", {"context": INBOUND}, format="json")
    assert response.json()["outcome"] == "cancelled", response.content
    site.requests.clear()
    llm.requests.clear()
    return CancelLog.objects.get()


def replay(client, entry, **body):
    response = client.post(f"/api/v1/cancellations/{entry.pk}/replay", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_replay_makes_no_outward_call_and_says_which_it_stood_in(api_client, entry, site, llm):
    body = replay(api_client, entry)
    assert site.requests == [] and llm.requests == []
    assert [(c["member"], c["standIn"]) for c in body["wouldCall"]] == [
        ("host.fetch", {"dryRun": True, "status": 0, "headers": {}, "body": ""}),
        ("host.fetch", {"dryRun": True, "status": 0, "headers": {}, "body": ""}),
        ("host.llm", "")]
    assert body["wouldCall"][0]["args"][1] == {"headers": {"X-HTTP-Method-Override": "DELETE"}}
    assert body["replayed"]["cancellation"]["reason"] == 'override 0, plain 0, llm ""'
    assert body["liveReads"] is False


def test_live_reads_make_plain_gets_only(api_client, entry, site, llm):
    body = replay(api_client, entry, liveReads=True)
    assert [(r.method, r.path) for r in site.requests] == [("GET", "/items")]   # not the overriding GET
    assert llm.requests == []
    assert [c["member"] for c in body["wouldCall"]] == ["host.fetch", "host.llm"]
    assert body["replayed"]["cancellation"]["reason"] == 'override 0, plain 200, llm ""'


def test_a_shadow_run_makes_no_outward_call_and_its_report_names_the_stand_ins(api_client, install, site, llm,
                                                                                  eager):
    caller = install("globalThis.middleware.systemPrompt = async (c) => "
                     f"(await host.fetch('{site.url}/x'), await host.llm('hi'), c.systemPrompt + '!');",
                     name="caller", grant=["host:fetch", "host:llm"])
    api_client.patch(f"/api/v1/plugins/{caller.pk}", {"mode": "shadow"}, format="json")
    api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json")
    assert site.requests == [] and llm.requests == []
    report = api_client.get(f"/api/v1/plugins/{caller.pk}/shadow").json()
    assert report["counts"]["wouldChange"] == 1
    assert report["standIns"] == ["host.fetch", "host.llm"]


def test_every_outward_member_has_a_stand_in_marked_or_empty():
    assert OUTWARD_MEMBERS == {"fetch", "llm", "decide", "session.conversation.read", "ssh.command"}
    for name in OUTWARD_MEMBERS:
        answer = STAND_INS[name]
        assert answer in ("", None) or answer["dryRun"] is True, name
    assert all(m.bridged for m in HOST_MEMBERS if m.outward)

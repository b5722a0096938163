"""host.session: peer.send through interAgentMessage, conversation.read, and the hop fuse."""

import json
import time

import pytest

from plugins_app.services.host import platform

from ..conftest import PROMPT
from .stubs import PlatformStub, execute, reporter

pytestmark = pytest.mark.django_db

SESSION = ["host:session"]
PEER = {"senderSessionId": "100", "senderAgentId": "7", "targetSessionId": "200",
        "isSubagentReport": False, "text": "hello"}


def test_session_data_comes_from_the_context(api_client, install):
    install(reporter("systemPrompt", "({id: host.session.id, agentId: host.session.agentId, kind: host.session.kind})"))
    body = execute(api_client, "systemPrompt", dict(PROMPT, sessionId="18446744073709551615", sessionKind="channel"))
    assert json.loads(body["value"]) == {"ok": {"id": "18446744073709551615", "agentId": "2", "kind": "channel"}}


def test_peer_send_fires_inter_agent_message_and_returns_an_effect(api_client, install):
    install(reporter("systemPrompt", "host.session.peer.send('555', 'status?')"), name="asker", grant=SESSION)
    install("globalThis.middleware.interAgentMessage = async (c) => "
            "`[from ${c.senderAgentId}@${c.senderSessionId} to ${c.targetSessionId}, report=${c.isSubagentReport}] ${c.text}`;",
            name="tagger")
    body = execute(api_client, "systemPrompt", PROMPT, hop=1, turnId="turn-9")
    rewritten = "[from 2@1 to 555, report=false] status?"
    assert json.loads(body["value"]) == {"ok": {"delivered": True, "text": rewritten}}
    assert body["effects"] == [{"type": "peerMessage", "senderSessionId": "1", "senderAgentId": "2",
                                "targetSessionId": "555", "text": rewritten, "cancelled": False,
                                "reason": None, "hop": 2}]


def test_a_cancelled_peer_message_is_reported_undelivered(api_client, install, account):
    install(reporter("systemPrompt", "host.session.peer.send('555', 'secret plans')"), grant=SESSION)
    install("globalThis.middleware.interAgentMessage = async (c, t) => "
            "c.text.includes('secret') ? t.cancel('no secrets between agents') : c.text;", name="guard")
    body = execute(api_client, "systemPrompt", PROMPT)
    assert json.loads(body["value"])["ok"] == {"delivered": False, "text": "secret plans"}
    (effect,) = body["effects"]
    assert (effect["cancelled"], effect["reason"], effect["hop"]) == (True, "no secrets between agents", 1)
    cancels = api_client.get("/api/v1/cancellations?hook=interAgentMessage").json()["results"]
    assert [(c["plugin"], c["hop"], c["sessionId"]) for c in cancels] == [("guard", 1, "1")]


def test_peer_send_needs_an_agent_in_the_hook(api_client, install):
    install(reporter("userMessageInbound", "host.session.peer.send('555', 'x')"), grant=SESSION)
    body = execute(api_client, "userMessageInbound",
                   {"sessionId": "1", "channelId": None, "text": "hi", "mediaIds": []})
    assert "does not say which agent" in json.loads(body["value"])["error"]
    assert body["effects"] == []


def test_peer_send_rejects_a_bad_target(api_client, install):
    install(reporter("systemPrompt", "host.session.peer.send('', 'x')"), grant=SESSION)
    body = execute(api_client, "systemPrompt", PROMPT)
    assert "target must be a session id" in json.loads(body["value"])["error"]


PING = """
globalThis.middleware.interAgentMessage = async (c) => {
  if (c.text.startsWith("pong") && host.session) {
    await host.session.peer.send(c.senderSessionId, "ping " + c.text.length);
  }
  host.log("info", `ping saw "${c.text}" with session ${host.session ? "present" : "withheld"}`);
  return c.text;
};
"""
PONG = PING.replace('startsWith("pong")', 'startsWith("ping")').replace('"ping " +', '"pong " +').replace(
    "ping saw", "pong saw")


def test_a_ping_pong_pair_stops_by_itself_at_the_hop_fuse(api_client, install):
    install(PING, name="ping", grant=SESSION)
    install(PONG, name="pong", grant=SESSION)
    started = time.monotonic()
    body = execute(api_client, "interAgentMessage", dict(PEER, text="ping"))
    assert time.monotonic() - started < 30   # it stops; nothing waits for a lock its caller holds
    assert [t["status"] for t in body["trace"]] == ["ran", "ran"]
    hops = [e["hop"] for e in body["effects"]]
    assert hops == [1, 2, 3, 4, 5]
    assert [e["text"].split()[0] for e in body["effects"]] == ["pong", "ping", "pong", "ping", "pong"]
    assert all(e["type"] == "peerMessage" and not e["cancelled"] for e in body["effects"])
    logs = api_client.get("/api/v1/logs?pageSize=100").json()["results"]
    withheld = [entry["message"] for entry in logs if "withheld" in entry["message"]]
    assert len(withheld) == 2   # both plugins ran at hop 5 without host.session


def test_peer_send_at_the_last_hop_with_a_session_is_allowed_and_then_withheld(api_client, install):
    install(reporter("interAgentMessage", "host.session ? host.session.peer.send('9', 'again') : 'withheld'"),
            grant=SESSION)
    body = execute(api_client, "interAgentMessage", PEER, hop=4)
    assert json.loads(body["value"])["ok"]["delivered"] is True
    assert [e["hop"] for e in body["effects"]] == [5]
    # The hop-5 chain ran the same plugin: there host.session was undefined.
    assert json.loads(body["effects"][0]["text"]) == {"ok": "withheld"}
    assert json.loads(execute(api_client, "interAgentMessage", PEER, hop=5)["value"]) == {"ok": "withheld"}


SUMMARISER = """
globalThis.middleware.sessionClearing = async () => {
  const { messages } = await host.session.conversation.read();
  host.log("info", JSON.stringify(messages));
};
"""


def test_conversation_read_uses_the_conversation_sent_with_the_request(api_client, install):
    install(SUMMARISER, grant=SESSION)
    context = {"sessionId": "1", "agentId": "2", "trailingText": None, "messageCount": 2,
               "subagentCount": 0, "peerThreadCount": 0}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    body = execute(api_client, "sessionClearing", context, conversation=messages)
    assert [t["status"] for t in body["trace"]] == ["ran"]
    (line,) = api_client.get("/api/v1/logs").json()["results"]
    assert json.loads(line["message"]) == messages


def test_conversation_read_asks_the_platform_otherwise(api_client, install, account):
    secret = "platform-secret"
    stub = PlatformStub(secret, {"/conversations/read": lambda req: (
        200, {"Content-Type": "application/json"},
        json.dumps({"messages": [{"role": "user", "content": f"session {req.json()['sessionId']}"}]}).encode())})
    try:
        platform.configure(account, {"baseUrl": stub.url, "signingSecret": secret})
        install(reporter("systemPrompt", "host.session.conversation.read()"), grant=SESSION)
        body = execute(api_client, "systemPrompt", PROMPT)
        assert json.loads(body["value"]) == {"ok": {"messages": [{"role": "user", "content": "session 1"}]}}
        assert [r.json() for r in stub.requests] == [{"sessionId": "1"}]
        assert stub.bad_signatures == 0
    finally:
        stub.close()


def test_conversation_read_without_a_platform_rejects_clearly(api_client, install):
    install(reporter("systemPrompt", "host.session.conversation.read()"), grant=SESSION)
    body = execute(api_client, "systemPrompt", PROMPT)
    assert "platform bridge is not configured" in json.loads(body["value"])["error"]


def test_session_is_absent_on_hooks_without_a_session(api_client, install):
    install(reporter("cronJobFiring", "typeof host.session"))
    body = execute(api_client, "cronJobFiring",
                   {"cronJobId": "1", "agentId": "2", "kind": "cron_job", "name": "n", "prompt": "p"})
    assert json.loads(body["value"]) == {"ok": "undefined"}



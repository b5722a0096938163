"""sessionClearing / sessionClearCompleted through the execute API: transcript reads, and repeats."""

import pytest

from plugins_app.models import PluginLog

pytestmark = pytest.mark.django_db

ARCHIVER = """
globalThis.middleware.sessionClearing = async (c) => {
  const { messages } = await host.session.conversation.read();
  host.log("info", `clearing ${c.sessionId}: read ${messages.length} of ${c.messageCount}: ${messages.map((m) => m.text).join("|")}`);
};
globalThis.middleware.sessionClearCompleted = async (c) => {
  host.log("info", `cleared ${c.sessionId}: ${c.deletedMessageCount} messages`);
};
"""
CLEARING = {"sessionId": "5", "agentId": "6", "trailingText": None, "messageCount": 2, "subagentCount": 0,
            "peerThreadCount": 0}
COMPLETED = {"sessionId": "5", "agentId": "6", "deletedMessageCount": 2, "deletedSubagentCount": 0,
             "deletedPeerThreadCount": 0}
CONVERSATION = [{"role": "user", "text": "hello"}, {"role": "assistant", "text": "hi"}]


def execute(client, hook, context, **extra):
    response = client.post(f"/api/v1/hooks/{hook}/execute", {"context": context, **extra}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def test_clearing_reads_the_transcript_sent_with_the_request_and_copes_with_repeats(api_client, install):
    install(ARCHIVER, name="archiver", grant=["host:session"])
    first = execute(api_client, "sessionClearing", CLEARING, conversation=CONVERSATION)
    second = execute(api_client, "sessionClearing", CLEARING, conversation=CONVERSATION)
    for body in (first, second):
        for entry in body["trace"]:
            entry.pop("durationMs")
    assert first == second
    assert first["value"] is None and [t["status"] for t in first["trace"]] == ["ran"]
    lines = list(PluginLog.objects.filter(hook="sessionClearing").values_list("message", flat=True))
    assert lines == ["clearing 5: read 2 of 2: hello|hi"] * 2


def test_clearing_reads_the_transcript_from_the_platform_when_none_is_sent(api_client, install, platform):
    platform.reply("/conversations/read", {"messages": [{"role": "user", "text": "from the platform"}]})
    install(ARCHIVER, name="archiver", grant=["host:session"])
    execute(api_client, "sessionClearing", CLEARING)
    [call] = platform.calls_to("/conversations/read")
    assert call["body"] == {"sessionId": "5"} and call["signed"] is True
    assert PluginLog.objects.get(hook="sessionClearing").message == "clearing 5: read 1 of 2: from the platform"


def test_clear_completed_may_fire_twice(api_client, install):
    install(ARCHIVER, name="archiver", grant=["host:session"])
    for _ in range(2):
        body = execute(api_client, "sessionClearCompleted", COMPLETED)
        assert body["outcome"] == "unchanged" and body["trace"][0]["status"] == "ran"
    assert PluginLog.objects.filter(hook="sessionClearCompleted").count() == 2


def test_without_the_session_grant_the_read_is_refused_and_the_clear_goes_on(api_client, install):
    install(ARCHIVER, name="archiver")
    body = execute(api_client, "sessionClearing", CLEARING, conversation=CONVERSATION)
    assert body["trace"][0]["status"] == "error"
    assert "host:session" in body["trace"][0]["warning"]

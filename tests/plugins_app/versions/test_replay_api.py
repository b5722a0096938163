"""POST /api/v1/cancellations/{id}/replay: the recorded veto against the chain as it is now or a
draft, side by side; writing host calls are listed as "would call"; nothing is written."""

import pytest

from plugins_app.models import AccountChange, CancelLog, HandlerWarning, PluginLog, UsageDaily, WorkspaceFile

pytestmark = pytest.mark.django_db

INBOUND = {"sessionId": "10", "channelId": None, "text": "rm -rf /", "mediaIds": []}
VETO = "globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('blocked: ' + c.text);"
LENIENT = ("globalThis.middleware.userMessageInbound = async (c, t) => "
           "c.text.includes('sudo') ? t.cancel('sudo is blocked') : undefined;")
PEER = {"senderSessionId": "100", "senderAgentId": "7", "targetSessionId": "200", "isSubagentReport": False,
        "text": "rm -rf /"}
WRITER = """globalThis.middleware.interAgentMessage = async (c, t) => {
  host.log('seen ' + c.text);
  const saved = await host.workspace.write('seen.txt', c.text);
  try { await host.fetch('http://127.0.0.1:9/audit', {method: 'POST', body: c.text}); } catch (e) {}
  const read = await host.workspace.read('seen.txt');
  return saved.dryRun ? c.text + ' (dry run, read ' + read + ')' : c.text;
};"""
PEER_VETO = "globalThis.middleware.interAgentMessage = async (c, t) => t.cancel('blocked: ' + c.text);"


def execute(client, context=INBOUND, hook="userMessageInbound"):
    response = client.post(f"/api/v1/hooks/{hook}/execute", {"context": context}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def replay(client, entry, **body):
    return client.post(f"/api/v1/cancellations/{entry.pk}/replay", body, format="json")


def footprint(account):
    return (CancelLog.objects.count(), HandlerWarning.objects.count(), PluginLog.objects.count(),
            WorkspaceFile.objects.count(), AccountChange.objects.count(),
            list(UsageDaily.objects.values_list("plugin_slug", "runs")),
            type(account).objects.get(pk=account.pk).hooks_version)


@pytest.fixture
def vetoed(api_client, install):
    """A veto plugin and the cancel-log entry it left."""
    veto = install(VETO, name="guard")
    assert execute(api_client)["outcome"] == "cancelled"
    return veto, CancelLog.objects.get()


def test_replay_against_the_same_chain_gives_the_same_outcome_and_writes_nothing(api_client, vetoed, account):
    veto, entry = vetoed
    before = footprint(account)
    response = replay(api_client, entry)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["recorded"]["outcome"] == "cancelled" and body["recorded"]["version"] == 1
    assert body["replayed"]["cancellation"] == {"installationId": str(veto.pk), "plugin": "guard",
                                                "reason": "blocked: rm -rf /"}
    assert body["sameOutcome"] is True and body["wouldCall"] == []
    assert footprint(account) == before


def test_replay_against_the_current_chain_after_a_deploy(api_client, vetoed, account):
    veto, entry = vetoed
    api_client.post(f"/api/v1/plugins/{veto.pk}/versions", {"source": LENIENT, "language": "javascript"}, format="json")
    api_client.post(f"/api/v1/plugins/{veto.pk}/versions/2/deploy", format="json")
    before = footprint(account)
    body = replay(api_client, entry).json()
    assert body["recorded"]["reason"] == "blocked: rm -rf /"
    assert (body["replayed"]["outcome"], body["replayed"]["cancellation"]) == ("unchanged", None)
    assert body["sameOutcome"] is False
    assert footprint(account) == before


def test_replay_against_a_draft_leaves_the_live_chain_alone(api_client, vetoed, account):
    veto, entry = vetoed
    api_client.post(f"/api/v1/plugins/{veto.pk}/versions", {"source": LENIENT, "language": "javascript"}, format="json")
    before = footprint(account)
    body = replay(api_client, entry, installationId=str(veto.pk), version="2").json()
    assert body["draft"] == {"installationId": str(veto.pk), "plugin": "guard", "version": 2}
    assert body["replayed"]["outcome"] == "unchanged"
    assert footprint(account) == before
    assert execute(api_client)["outcome"] == "cancelled"   # the live version still vetoes


def test_writing_host_calls_are_shown_as_would_call_and_not_made(api_client, install, account):
    writer = install(WRITER, name="writer", grant=["host:workspace", "host:fetch"])
    install(PEER_VETO, name="guard")
    execute(api_client, PEER, "interAgentMessage")
    entry = CancelLog.objects.get()
    WorkspaceFile.objects.update(content="as written by the live run")
    files, logs = WorkspaceFile.objects.count(), PluginLog.objects.count()
    assert (files, logs) == (1, 1)
    body = replay(api_client, entry).json()
    assert body["wouldCall"] == [
        {"installationId": str(writer.pk), "plugin": "writer", "member": "host.workspace.write",
         "args": ["seen.txt", "rm -rf /"], "standIn": {"dryRun": True}},
        {"installationId": str(writer.pk), "plugin": "writer", "member": "host.fetch",
         "args": ["http://127.0.0.1:9/audit", {"method": "POST", "body": "rm -rf /"}],
         "standIn": {"dryRun": True, "status": 0, "headers": {}, "body": ""}}]
    assert [t["status"] for t in body["replayed"]["trace"]] == ["ran", "cancelled"]
    # Reading members really run: the read sees the live run's file, not the replay's unwritten text.
    assert body["replayed"]["cancellation"]["reason"] == "blocked: rm -rf / (dry run, read as written by the live run)"
    assert (WorkspaceFile.objects.count(), PluginLog.objects.count(), CancelLog.objects.count()) == (files, logs, 1)


def test_bad_replays_are_4xx(api_client, other_api_client, vetoed, install, other_account):
    veto, entry = vetoed
    other = install(VETO, name="other guard", target=other_account)
    assert other_api_client.post(f"/api/v1/cancellations/{entry.pk}/replay").status_code == 404
    assert api_client.post("/api/v1/cancellations/99999/replay").status_code == 404
    assert api_client.post("/api/v1/cancellations/abc/replay").status_code == 404
    assert replay(api_client, entry, installationId=str(veto.pk), version="9").status_code == 404
    assert replay(api_client, entry, installationId=str(other.pk), version="1").status_code == 404
    response = replay(api_client, entry, version="1")
    assert response.status_code == 400 and response.json()["error"]["field"] == "installationId"
    assert replay(api_client, entry, dryRun=False).status_code == 400
    assert CancelLog.objects.count() == 1

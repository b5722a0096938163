"""host.workspace: an agent's files through the execute API, paths, quota, and whose workspace it is."""

import json
from dataclasses import replace

import pytest

from plugins_app.models import WorkspaceFile
from plugins_app.runtime.web.chain import HostError
from plugins_app.services.host.workspace import normalise_path

from ..conftest import PROMPT
from .stubs import execute, reporter

pytestmark = pytest.mark.django_db

WORKSPACE = ["host:workspace"]


def run(api_client, install, expression, context=PROMPT, hook="systemPrompt"):
    install(reporter(hook, expression), grant=WORKSPACE)
    return json.loads(execute(api_client, hook, context)["value"])


def test_write_read_list_delete(api_client, install):
    script = """(async () => {
      const w = host.workspace;
      const written = await w.write('notes/./today.md', 'héllo');
      await w.write('notes/old.md', 'x');
      await w.write('top.txt', 'y');
      const text = await w.read('notes/today.md');
      const notes = (await w.list('notes/')).files.map((f) => [f.path, f.size]);
      const all = (await w.list()).files.map((f) => f.path);
      const gone = await w.delete('notes/old.md');
      const again = await w.delete('notes/old.md');
      return {written, text, notes, all, gone, again, missing: await w.read('notes/old.md')};
    })()"""
    assert run(api_client, install, script) == {"ok": {
        "written": {"path": "notes/today.md", "size": 6},
        "text": "héllo",
        "notes": [["notes/old.md", 1], ["notes/today.md", 6]],
        "all": ["notes/old.md", "notes/today.md", "top.txt"],
        "gone": {"deleted": True}, "again": {"deleted": False}, "missing": None}}
    assert set(WorkspaceFile.objects.values_list("agent_id", "path")) == {("2", "notes/today.md"), ("2", "top.txt")}


def test_files_belong_to_the_agent_the_hook_fired_for(api_client, install):
    install(reporter("systemPrompt", "host.workspace.write('a.txt', c.agentId).then(() => host.workspace.read('a.txt'))"),
            grant=WORKSPACE)
    assert json.loads(execute(api_client, "systemPrompt", dict(PROMPT, agentId="1"))["value"]) == {"ok": "1"}
    assert json.loads(execute(api_client, "systemPrompt", dict(PROMPT, agentId="2"))["value"]) == {"ok": "2"}
    assert sorted(WorkspaceFile.objects.values_list("agent_id", "content")) == [("1", "1"), ("2", "2")]


def test_on_inter_agent_message_the_workspace_is_the_senders(api_client, install):
    context = {"senderSessionId": "100", "senderAgentId": "7", "targetSessionId": "200",
               "isSubagentReport": False, "text": "hello"}
    assert run(api_client, install, "host.workspace.write('log.txt', c.text)", context, "interAgentMessage")["ok"]
    assert list(WorkspaceFile.objects.values_list("agent_id", "path")) == [("7", "log.txt")]


def test_workspaces_are_per_account(api_client, other_api_client, install, other_account):
    WorkspaceFile.objects.create(account=other_account, agent_id="2", path="secret.txt", content="theirs", size=6)
    assert run(api_client, install, "host.workspace.read('secret.txt')") == {"ok": None}


def test_the_quota_rejects_a_write_and_keeps_the_old_content(api_client, install, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, workspace_quota_bytes=10)
    script = """(async () => {
      await host.workspace.write('a', '123456');
      await host.workspace.write('a', '1234567890');   // replacing a file counts its new size only
      try { await host.workspace.write('b', 'x'); } catch (e) { return {error: e.message, a: await host.workspace.read('a')}; }
    })()"""
    result = run(api_client, install, script)["ok"]
    assert "over its quota of 10 bytes" in result["error"]
    assert result["a"] == "1234567890"
    assert not WorkspaceFile.objects.filter(path="b").exists()


def test_workspace_is_absent_on_hooks_without_an_agent(api_client, install):
    inbound = {"sessionId": "1", "channelId": None, "text": "t", "mediaIds": []}
    assert run(api_client, install, "typeof host.workspace", inbound, "userMessageInbound") == {"ok": "undefined"}


@pytest.mark.parametrize("raw, expected", [
    ("a.txt", "a.txt"), ("./a/b//c.txt", "a/b/c.txt"), ("dir/", "dir"), ("é/ü.md", "é/ü.md"),
])
def test_paths_are_normalised(raw, expected):
    assert normalise_path(raw) == expected


@pytest.mark.parametrize("raw, message", [
    ("../escape", "'..'"), ("a/../../b", "'..'"), ("/etc/passwd", "absolute"), ("", "empty"), ("./", "empty"),
    ("a\\b", "backslash"), ("a\x00b", "control"), ("x" * 256, "over 255"),
])
def test_bad_paths_are_refused(raw, message):
    with pytest.raises(HostError, match=message):
        normalise_path(raw)


def test_a_bad_path_reaches_the_plugin_as_a_rejection(api_client, install):
    assert "'..'" in run(api_client, install, "host.workspace.write('../x', 'y')")["error"]
    assert not WorkspaceFile.objects.exists()

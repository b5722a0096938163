"""Matchers at the seam: a handler whose plugin's matcher does not hold is skipped before the engine."""

import pytest

from plugins_app.errors import InvalidInput
from plugins_app.models import CancelLog, Installation, Plugin, PluginVersion, UsageDaily
from plugins_app.services.execution import invoke as seam
from plugins_app.services.execution.invoke import Mode, invoke
from plugins_app.services.observability.metering import meter

from ..conftest import PROMPT

pytestmark = pytest.mark.django_db

SSH = {"sessionId": "1", "agentId": "2", "sshHostId": "3", "hostDisplayName": "web", "kind": "command",
       "command": "ls -la", "path": None, "content": None}
RM_GUARD = """
globalThis.middleware.sshCommandSending = async (c, t) => t.cancel("no rm -r");
globalThis.middleware.match = { sshCommandSending: { command: { regex: "\\\\brm\\\\s+-[a-z]*r" } } };
"""


def agent_only(agent: str, suffix: str) -> str:
    return (f"globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + {suffix!r};\n"
            f"globalThis.middleware.match = {{ systemPrompt: {{ agentId: {{ in: [{agent!r}] }} }} }};")


def execute(client, hook, context):
    return client.post(f"/api/v1/hooks/{hook}/execute", {"context": context}, format="json")


def test_the_declaration_is_read_at_install_and_stored_with_the_version(install):
    guard = install(RM_GUARD, name="guard")
    declared = {"sshCommandSending": {"command": {"regex": r"\brm\s+-[a-z]*r"}}}
    assert Plugin.objects.get(pk=guard.plugin_id).matchers == declared
    assert PluginVersion.objects.get(installation=guard, number=1).matchers == declared


def test_a_handler_whose_matcher_fails_is_skipped_and_the_chain_needs_no_engine(api_client, install, monkeypatch):
    guard = install(RM_GUARD, name="guard")

    def no_engine():
        raise AssertionError("a chain where nothing matches must not reach for an engine")
    monkeypatch.setattr(seam, "get_tier", no_engine)
    body = execute(api_client, "sshCommandSending", SSH).json()
    assert body["outcome"] == "unchanged"
    assert body["trace"] == [{"installationId": str(guard.pk), "plugin": "guard", "status": "skipped",
                              "changed": False, "durationMs": 0.0, "warning": None, "reason": "match"}]


def test_a_handler_whose_matcher_holds_runs(api_client, install):
    guard = install(RM_GUARD, name="guard")
    body = execute(api_client, "sshCommandSending", {**SSH, "command": "sudo rm -rf /var/tmp"}).json()
    assert body["outcome"] == "cancelled"
    assert body["cancellation"]["installationId"] == str(guard.pk)
    assert [t["status"] for t in body["trace"]] == ["cancelled"]
    assert "reason" not in body["trace"][0]


def test_skipped_handlers_keep_their_place_and_the_others_run_in_order(api_client, install):
    a = install(agent_only("2", "A"), name="a")
    b = install(agent_only("99", "B"), name="b")
    c = install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + 'C';", name="c")
    body = execute(api_client, "systemPrompt", PROMPT).json()
    assert body["value"] == "baseAC"
    assert [(t["installationId"], t["status"]) for t in body["trace"]] == [
        (str(a.pk), "ran"), (str(b.pk), "skipped"), (str(c.pk), "ran")]


def test_ids_are_compared_as_strings(api_client, install):
    install(agent_only("2", "A"), name="a")
    # "02" is a different id from "2", though the same number.
    body = execute(api_client, "systemPrompt", {**PROMPT, "agentId": "02"}).json()
    assert [t["status"] for t in body["trace"]] == ["skipped"]


def test_skips_are_not_metered_but_counted_in_usage(api_client, install, account, settings):
    install(agent_only("99", "B"), name="b")
    install(agent_only("2", "A"), name="a")
    execute(api_client, "systemPrompt", PROMPT)
    execute(api_client, "systemPrompt", PROMPT)
    meter.flush()
    rows = {r.plugin_slug: (r.runs, r.skipped) for r in UsageDaily.objects.filter(account=account)}
    assert rows == {"b": (0, 2), "a": (2, 0)}
    listed = api_client.get("/api/v1/usage").json()["results"]
    assert sorted((r["plugin"], r["runs"], r["skipped"]) for r in listed) == [("a", 2, 0), ("b", 0, 2)]


def test_skips_are_counted_in_metrics(api_client, install):
    from plugins_app.services.observability import metrics
    install(agent_only("99", "B"), name="b")
    metrics.deferred.apply()   # what earlier tests queued
    before = metrics.HANDLER_SKIPPED.labels("match")._value.get()
    execute(api_client, "systemPrompt", PROMPT)
    metrics.deferred.apply()
    assert metrics.HANDLER_SKIPPED.labels("match")._value.get() == before + 1


def test_try_runs_honour_matchers_and_show_the_value_passed_on(account, install):
    install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + 'X';", name="x")
    install(agent_only("99", "B"), name="b")
    invocation = invoke(account, "systemPrompt", PROMPT, mode=Mode.TRY, origin="try")
    assert [(t.status, t.value) for t in invocation.result.trace] == [("ran", "baseX"), ("skipped", "baseX")]


@pytest.mark.parametrize(("declaration", "path"), [
    ("{ systemPrompt: { text: { equals: 'x' } } }", "middleware.match.systemPrompt.text"),
    ("{ systemPrompt: { systemPrompt: { regex: '(a)\\\\1' } } }", "middleware.match.systemPrompt.systemPrompt.regex"),
    ("{ systemPrompt: { agentId: { in: [7] } } }", "middleware.match.systemPrompt.agentId.in[0]"),
    ("{ systemPrompt: { sessionKind: { startsWith: 5 } } }", "middleware.match.systemPrompt.sessionKind.startsWith"),
    ("{ userMessageInbound: { text: { equals: 'x' } } }", "middleware.match.userMessageInbound"),
    ("{ systemPrompt: { any: [] } }", "middleware.match.systemPrompt.any"),
    ("'everything'", "middleware.match"),
])
def test_a_bad_declaration_is_refused_at_install_naming_its_path(install, declaration, path):
    with pytest.raises(InvalidInput) as refused:
        install(f"globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;\n"
                f"globalThis.middleware.match = {declaration};")
    assert refused.value.extra["field"] == path
    assert not Installation.objects.exists()


def test_a_bad_declaration_answers_400_through_the_api(api_client):
    response = api_client.post("/api/v1/plugins", {
        "name": "bad", "language": "javascript",
        "source": "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;\n"
                  "globalThis.middleware.match = { systemPrompt: { nope: { equals: 'x' } } };"}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == "middleware.match.systemPrompt.nope"
    assert "not a field of systemPrompt" in response.json()["error"]["message"]


INBOUND = {"sessionId": "10", "channelId": None, "text": "rm -rf /", "mediaIds": []}
VETO_RM = ("globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('no rm: ' + c.text);\n"
           "globalThis.middleware.match = { userMessageInbound: { text: { startsWith: 'rm' } } };")


def test_a_replay_honours_the_matcher_of_the_code_it_runs(api_client, install, account):
    from plugins_app.services.versions import releases
    from plugins_app.services.versions.replay import replay_cancellation
    guard = install(VETO_RM, name="guard")
    assert execute(api_client, "userMessageInbound", INBOUND).json()["outcome"] == "cancelled"
    entry = CancelLog.objects.get(account=account)
    again = replay_cancellation(account, entry.pk)
    assert again.result.outcome == "cancelled"
    # A draft whose matcher no longer takes "rm ..." skips its handler in the replay.
    draft = releases.create_draft(account, guard.pk, source=VETO_RM.replace("startsWith: 'rm'", "startsWith: 'sudo'"),
                                  language="javascript")
    with_draft = replay_cancellation(account, entry.pk, installation_id=guard.pk, version=draft.number)
    assert with_draft.result.outcome == "unchanged"
    assert [(t.status, t.reason) for t in with_draft.result.trace] == [("skipped", "match")]


def test_a_shadow_run_honours_the_matcher_and_is_not_counted_when_skipped(api_client, install, account, eager):
    guard = install(VETO_RM, name="guard")
    assert api_client.patch(f"/api/v1/plugins/{guard.pk}", {"mode": "shadow"}, format="json").status_code == 200
    execute(api_client, "userMessageInbound", {**INBOUND, "text": "ls"})      # matcher fails: nothing ran
    execute(api_client, "userMessageInbound", INBOUND)                        # matcher holds: would cancel
    shadow = api_client.get(f"/api/v1/plugins/{guard.pk}/shadow").json()
    assert shadow["counts"]["wouldCancel"] == 1
    assert shadow["counts"]["calls"] == 1
    meter.flush()
    assert dict(UsageDaily.objects.values_list("plugin_slug", "runs")) == {"guard:shadow": 1}


@pytest.mark.parametrize(("declaration", "said"), [
    ("{ get systemPrompt() { throw new Error('gotcha'); } }", "does not read as JSON data"),
    ("{ systemPrompt: { sessionKind: { in: Array(100000).fill('direct') } } }", "over 256 KiB"),
])
def test_a_declaration_that_is_not_plain_data_is_refused(install, declaration, said):
    from plugins_app.errors import CompileFailed
    with pytest.raises(CompileFailed) as refused:
        install(f"globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;\n"
                f"globalThis.middleware.match = {declaration};")
    assert said in str(refused.value.detail)
    assert not Installation.objects.exists()

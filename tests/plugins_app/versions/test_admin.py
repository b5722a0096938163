"""Versions, the change log and replay in the admin: admins draft, deploy and roll back; auditors read
and replay but cannot deploy; another account's pages answer 404."""

import pytest
from django.urls import reverse

from plugins_app.models import AccountChange, CancelLog, Installation, PluginVersion, UsageDaily
from plugins_app.services.versions import releases as versions

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

INBOUND = {"sessionId": "10", "channelId": None, "text": "hi", "mediaIds": []}
FETCHER = "globalThis.middleware.systemPrompt = async (c) => (await host.fetch('http://127.0.0.1:9/')).status + '';"


def history(installation):
    return reverse("admin:plugins_app_pluginversion_installation", args=[installation.pk])


def deploy_url(installation, number):
    return reverse("admin:plugins_app_pluginversion_deploy", args=[installation.pk, number])


def rollback_url(installation):
    return reverse("admin:plugins_app_pluginversion_rollback", args=[installation.pk])


def run_prompt(api_client):
    return api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json").json()["value"]


def test_an_admin_drafts_compares_deploys_and_rolls_back(login, install, account, api_client):
    plugin = install(appender("-v1") + "\n// first", name="greeter")
    client = login("acme", "alice", "admin")
    response = client.post(reverse("admin:plugins_app_pluginversion_draft", args=[plugin.pk]),
                           {"language": "javascript", "source": appender("-v2") + "\n// second", "note": "v2"})
    assert response.status_code == 302
    assert Installation.objects.get(pk=plugin.pk).live_version == 1 and run_prompt(api_client) == "base-v1"

    page = client.get(history(plugin), {"a": "1", "b": "2"})
    html = page.content.decode()
    assert page.status_code == 200 and 'id="version-2"' in html and "Deploy version 2" in html
    assert 'class="diff"' in html and "first" in html and "second" in html   # the side-by-side table

    assert client.post(deploy_url(plugin, 2)).status_code == 302
    assert run_prompt(api_client) == "base-v2"
    assert client.post(rollback_url(plugin)).status_code == 302
    assert run_prompt(api_client) == "base-v1"
    rows = list(AccountChange.objects.filter(action__in=["draft", "deploy", "rollback"]).order_by("id")
                .values_list("action", "actor_name"))
    assert rows == [("draft", "alice"), ("deploy", "alice"), ("rollback", "alice")]
    html = client.get(history(plugin)).content.decode()
    assert "greeter: rolled back to version 1 (was 2)" in html and "greeter: deployed version 2 (was 1)" in html


def test_a_compile_error_in_a_draft_is_shown_and_saves_nothing(login, install):
    plugin = install(appender("-v1"))
    client = login("acme", "alice", "admin")
    response = client.post(reverse("admin:plugins_app_pluginversion_draft", args=[plugin.pk]),
                           {"language": "javascript", "source": "globalThis.middleware.systemPrompt = (c) => {"})
    # Kept with a final newline (runtime/source_text.py): the missing brace is found on line 2.
    assert response.status_code == 200 and "line 2, column 1: &#x27;}&#x27; expected" in response.content.decode()
    assert PluginVersion.objects.filter(installation=plugin).count() == 1


def test_the_permission_difference_blocks_a_deploy_until_granted(login, install):
    plugin = install(appender("-v1"))
    versions.create_draft(plugin.account, plugin.pk, source=FETCHER, language="javascript")
    client = login("acme", "alice", "admin")
    assert "not granted: host:fetch" in client.get(history(plugin)).content.decode()
    response = client.post(deploy_url(plugin, 2), follow=True)
    assert "asks for host:fetch, not granted" in response.content.decode()
    assert Installation.objects.get(pk=plugin.pk).live_version == 1
    client.post(deploy_url(plugin, 2), {"grant": ["host:fetch"]})
    installation = Installation.objects.get(pk=plugin.pk)
    assert (installation.live_version, installation.granted_permissions) == (2, ["host:fetch"])


def test_an_auditor_reads_the_history_but_cannot_deploy(login, install, api_client):
    plugin = install(appender("-v1"))
    versions.create_draft(plugin.account, plugin.pk, source=appender("-v2"), language="javascript")
    client = login("acme", "audrey", "auditor")
    page = client.get(history(plugin))
    assert page.status_code == 200 and 'id="version-2"' in page.content.decode()
    assert "Deploy version" not in page.content.decode() and "hub-draft" not in page.content.decode()
    assert client.get(reverse("admin:plugins_app_pluginversion_changelist")).status_code == 200
    changes_before = AccountChange.objects.count()
    assert client.post(deploy_url(plugin, 2)).status_code == 403
    assert client.post(rollback_url(plugin)).status_code == 403
    assert client.post(reverse("admin:plugins_app_pluginversion_draft", args=[plugin.pk]),
                       {"language": "javascript", "source": appender("-v3")}).status_code == 403
    assert Installation.objects.get(pk=plugin.pk).live_version == 1
    assert PluginVersion.objects.count() == 2 and AccountChange.objects.count() == changes_before
    assert run_prompt(api_client) == "base-v1"


def test_another_accounts_history_answers_404(login, install, other_account):
    theirs = install(appender("-x"), target=other_account)
    versions.create_draft(other_account, theirs.pk, source=appender("-y"), language="javascript")
    client = login("acme", "alice", "admin")
    assert client.get(history(theirs)).status_code == 404
    assert client.post(deploy_url(theirs, 2)).status_code == 404
    assert client.get(history(theirs).replace(str(theirs.pk), "abc")).status_code == 404
    assert Installation.objects.get(pk=theirs.pk).live_version == 1
    listed = client.get(reverse("admin:plugins_app_pluginversion_changelist")).context["cl"].result_list
    assert list(listed) == []


def test_the_change_log_page_is_scoped_and_filtered(login, install, other_account):
    first = install(appender("-a"), name="first")
    install(appender("-b"), name="second")
    install(appender("-x"), name="theirs", target=other_account)
    client = login("acme", "alice", "admin")
    client.post(reverse("admin:plugins_app_installation_changelist"),
                {"action": "disable_selected", "_selected_action": [first.pk]})
    auditor = login("acme", "audrey", "auditor")
    url = reverse("admin:plugins_app_accountchange_changelist")
    rows = auditor.get(url).context["cl"].result_list
    assert sorted((r.action, r.plugin_slug) for r in rows) == [("disable", "first"), ("install", "first"),
                                                              ("install", "second")]
    disabled = auditor.get(url, {"action": "disable"}).context["cl"].result_list
    assert [(r.actor_name, r.before, r.after) for r in disabled] == [("alice", {"enabled": True}, {"enabled": False})]
    assert [r.plugin_slug for r in auditor.get(url, {"actor_name": "alice"}).context["cl"].result_list] == ["first"]
    detail = auditor.get(reverse("admin:plugins_app_accountchange_change", args=[disabled[0].pk]))
    assert detail.status_code == 200 and "<del>true</del>" in detail.content.decode()
    theirs = AccountChange.objects.get(plugin_slug="theirs")
    assert auditor.get(reverse("admin:plugins_app_accountchange_change", args=[theirs.pk])).status_code == 404
    assert auditor.post(reverse("admin:plugins_app_accountchange_delete", args=[disabled[0].pk])).status_code == 403


def test_an_auditor_replays_a_cancel_without_writing(login, install, api_client, account, other_account):
    veto = install("globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('v1 no');", name="guard")
    api_client.post("/api/v1/hooks/userMessageInbound/execute", {"context": INBOUND}, format="json")
    entry = CancelLog.objects.get()
    versions.create_draft(account, veto.pk, source="globalThis.middleware.userMessageInbound = async () => {};",
                          language="javascript")
    footprint = (CancelLog.objects.count(), list(UsageDaily.objects.values_list("runs", flat=True)))
    client = login("acme", "audrey", "auditor")
    url = reverse("admin:plugins_app_cancellog_replay", args=[entry.pk])
    detail = client.get(reverse("admin:plugins_app_cancellog_change", args=[entry.pk]))
    assert "Replay against" in detail.content.decode()
    same = client.post(url, {"draft": ""})
    assert same.context["result"]["replayed"]["cancellation"]["reason"] == "v1 no"
    drafted = client.post(url, {"draft": f"{veto.pk}:2"})
    assert drafted.context["result"]["replayed"]["outcome"] == "unchanged"
    assert 'id="hub-replayed-outcome">unchanged<' in drafted.content.decode()
    assert (CancelLog.objects.count(), list(UsageDaily.objects.values_list("runs", flat=True))) == footprint
    theirs = CancelLog.objects.create(account=other_account, hook="userMessageInbound", plugin_slug="x",
                                      reason="no", context=INBOUND)
    assert client.post(reverse("admin:plugins_app_cancellog_replay", args=[theirs.pk])).status_code == 404


def test_a_replay_that_would_call_a_host_member_shows_it(login, install, api_client, account):
    # Issue 33: the page answered 500 whenever wouldCall listed a host member (its template's default
    # filter looked up an `effect` the entry does not have).
    install("""globalThis.middleware.interAgentMessage = async (c, t) => {
  await host.workspace.write('seen.txt', c.text);
  return t.cancel('kept a copy');
};""", name="copier", grant=["host:workspace"])   # a hook that carries an agent, so a workspace
    peer = {"senderSessionId": "100", "senderAgentId": "7", "targetSessionId": "200", "isSubagentReport": False,
            "text": "rm -rf /"}
    api_client.post("/api/v1/hooks/interAgentMessage/execute", {"context": peer}, format="json")
    entry = CancelLog.objects.get()
    client = login("acme", "audrey", "auditor")
    page = client.post(reverse("admin:plugins_app_cancellog_replay", args=[entry.pk]), {"draft": ""})
    assert page.status_code == 200
    would_call = page.content.decode().split('id="hub-would-call"')[1].split("</ul>")[0]
    assert "host.workspace.write" in would_call and "seen.txt" in would_call and "copier" in would_call


LOOKER = """globalThis.middleware.userMessageInbound = async (c, t) => {{
  const answer = await host.fetch('{url}/status');
  return t.cancel('status ' + answer.status);
}};"""


@pytest.fixture
def looked_up(install, api_client, settings):
    """A veto that GETs a local site, and the cancel-log entry it left (the site's requests cleared)."""
    from dataclasses import replace

    from ..host.stubs import StubServer, json_answer
    site = StubServer(lambda req: json_answer(200, {}))
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)
    install(LOOKER.format(url=site.url), name="looker", grant=["host:fetch"])
    api_client.post("/api/v1/hooks/userMessageInbound/execute", {"context": INBOUND}, format="json")
    site.requests.clear()
    yield CancelLog.objects.get(), site
    site.close()


def test_an_auditor_cannot_ask_for_live_reads_and_an_admin_can(login, looked_up):
    entry, site = looked_up
    url = reverse("admin:plugins_app_cancellog_replay", args=[entry.pk])
    auditor = login("acme", "audrey", "auditor")
    assert 'name="live_reads"' not in auditor.get(url).content.decode()
    page = auditor.post(url, {"draft": "", "live_reads": "on"})   # a hand-made form changes nothing
    assert page.context["result"]["replayed"]["cancellation"]["reason"] == "status 0"
    assert site.requests == []
    assert "stood in" in page.content.decode().split('id="hub-would-call"')[1]
    admin = login("acme", "alice", "admin")
    assert 'name="live_reads"' in admin.get(url).content.decode()
    assert admin.post(url, {"draft": ""}).context["result"]["replayed"]["cancellation"]["reason"] == "status 0"
    assert site.requests == []
    live = admin.post(url, {"draft": "", "live_reads": "on"})
    assert live.context["result"]["replayed"]["cancellation"]["reason"] == "status 200"
    assert [r.method for r in site.requests] == ["GET"]


def test_the_run_against_menu_selects_what_was_run_and_lists_only_versions_hooking_the_point(
        login, install, looked_up):
    entry, _ = looked_up
    install(appender("-x"), name="prompter")   # hooks systemPrompt, not userMessageInbound
    client = login("acme", "alice", "admin")
    page = client.post(reverse("admin:plugins_app_cancellog_replay", args=[entry.pk]), {"draft": ""}).content.decode()
    menu = page.split('name="draft"')[1].split("</select>")[0]
    assert "looker version 1" in menu and "prompter" not in menu
    assert menu.count(" selected") == 1 and 'value="" selected' in menu   # not "looker version 1 (live)"
    drafted = client.post(reverse("admin:plugins_app_cancellog_replay", args=[entry.pk]),
                          {"draft": f"{entry.installation_id}:1"}).content.decode()
    menu = drafted.split('name="draft"')[1].split("</select>")[0]
    assert menu.count(" selected") == 1 and f'value="{entry.installation_id}:1" selected' in menu

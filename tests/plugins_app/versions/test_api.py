"""Versions through the API: drafts change nothing, deploy and rollback take effect on the next call,
positions/settings/grants survive, permission differences block a deploy, and bad input changes nothing."""

import pytest

from plugins_app.models import AccountChange, CancelLog, ChainEntry, HandlerWarning, Installation, PluginVersion

from ..catalog_support import install_official
from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

INBOUND = {"sessionId": "10", "channelId": None, "text": "hi", "mediaIds": []}
FETCHER = "globalThis.middleware.systemPrompt = async (c) => (await host.fetch('http://127.0.0.1:9/')).status + '';"


def execute(client, hook, context):
    response = client.post(f"/api/v1/hooks/{hook}/execute", {"context": context}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def draft(client, installation, source, **extra):
    return client.post(f"/api/v1/plugins/{installation.pk}/versions",
                       {"source": source, "language": "javascript", **extra}, format="json")


def deploy(client, installation, number, **body):
    return client.post(f"/api/v1/plugins/{installation.pk}/versions/{number}/deploy", body, format="json")


def prompt(client):
    return execute(client, "systemPrompt", PROMPT)["value"]


def test_install_is_version_one_and_a_draft_changes_nothing_that_runs(api_client, install):
    plugin = install(appender("-v1"))
    listed = api_client.get(f"/api/v1/plugins/{plugin.pk}/versions").json()
    assert listed["live"] == 1 and [v["number"] for v in listed["versions"]] == [1]
    assert listed["versions"][0]["live"] is True
    assert prompt(api_client) == "base-v1"

    response = draft(api_client, plugin, appender("-v2"), note="louder")
    assert response.status_code == 201, response.content
    assert response.json()["number"] == 2 and response.json()["live"] is False
    assert response.json()["note"] == "louder" and response.json()["createdBy"] == "API key tests"
    assert prompt(api_client) == "base-v1"
    assert api_client.get(f"/api/v1/plugins/{plugin.pk}").json()["liveVersion"] == 1


def test_deploy_then_rollback_each_take_effect_on_the_next_call(api_client, install, account):
    plugin = install(appender("-v1"))
    assert prompt(api_client) == "base-v1"   # the chain is cached now
    draft(api_client, plugin, appender("-v2"))
    marker = type(account).objects.get(pk=account.pk).hooks_version
    response = deploy(api_client, plugin, 2)
    assert response.status_code == 200, response.content
    assert response.json()["plugin"]["liveVersion"] == 2 and response.json()["version"]["live"] is True
    assert type(account).objects.get(pk=account.pk).hooks_version > marker
    assert prompt(api_client) == "base-v2"

    response = api_client.post(f"/api/v1/plugins/{plugin.pk}/rollback", {}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["version"]["number"] == 1
    assert prompt(api_client) == "base-v1"
    rows = list(AccountChange.objects.filter(account=account, action__in=["deploy", "rollback"])
                .order_by("id").values_list("action", "before", "after", "actor_name"))
    assert [(a, b["version"], after["version"], who) for a, b, after, who in rows] == [
        ("deploy", 1, 2, "API key tests"), ("rollback", 2, 1, "API key tests")]


def test_rollback_passes_over_drafts_never_deployed(api_client, install):
    plugin = install(appender("-v1"))
    draft(api_client, plugin, appender("-v2"))
    draft(api_client, plugin, appender("-v3"))
    assert deploy(api_client, plugin, 3).status_code == 200
    assert api_client.post(f"/api/v1/plugins/{plugin.pk}/rollback").json()["version"]["number"] == 1
    assert prompt(api_client) == "base-v1"
    response = api_client.post(f"/api/v1/plugins/{plugin.pk}/rollback")
    assert response.status_code == 409 and "no earlier version" in response.json()["error"]["message"]


def test_positions_settings_and_grants_survive_deploy_and_rollback(api_client, install):
    first = install(appender("-a"))
    # Asks for host:fetch (the call is in the code) without making it.
    second = install(appender("-b") + "\nconst never = () => host.fetch('http://127.0.0.1:9/');", grant=["host:fetch"])
    order = [str(second.pk), str(first.pk)]
    assert api_client.put("/api/v1/chains/systemPrompt", {"order": order}, format="json").status_code == 200
    draft(api_client, first, appender("-A2"))
    assert deploy(api_client, first, 2).status_code == 200
    chain = api_client.get("/api/v1/chains/systemPrompt").json()["chain"]
    assert [c["installationId"] for c in chain] == order
    assert prompt(api_client) == "base-b-A2"
    draft(api_client, second, appender("-b2"))
    assert deploy(api_client, second, 2).status_code == 200
    assert Installation.objects.get(pk=second.pk).granted_permissions == ["host:fetch"]
    assert api_client.post(f"/api/v1/plugins/{second.pk}/rollback").status_code == 200
    assert Installation.objects.get(pk=second.pk).granted_permissions == ["host:fetch"]
    assert [c["installationId"] for c in api_client.get("/api/v1/chains/systemPrompt").json()["chain"]] == order


def test_official_code_follows_the_catalog(api_client, synced):
    installation = Installation.objects.get(pk=install_official(api_client, "caveman")["id"])
    response = draft(api_client, installation, appender("-mine"))
    assert response.status_code == 409 and "official" in response.json()["error"]["message"]
    assert deploy(api_client, installation, 1).status_code == 409
    assert api_client.post(f"/api/v1/plugins/{installation.pk}/rollback").status_code == 409
    assert list(PluginVersion.objects.filter(installation=installation).values_list("number", "created_by_name")) == [
        (1, "API key tests")]


def test_a_version_asking_for_an_ungranted_permission_cannot_deploy_until_granted(api_client, install, account):
    plugin = install(appender("-v1"))
    assert draft(api_client, plugin, FETCHER).json()["notGranted"] == ["host:fetch"]
    changes_before = AccountChange.objects.count()
    response = deploy(api_client, plugin, 2)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "permission_not_granted"
    assert response.json()["error"]["missing"] == ["host:fetch"]
    assert Installation.objects.get(pk=plugin.pk).live_version == 1
    assert AccountChange.objects.count() == changes_before
    assert prompt(api_client) == "base-v1"
    # The draft's permission may be granted before it runs; then the deploy goes through.
    granted = api_client.post(f"/api/v1/plugins/{plugin.pk}/grant", {"grant": ["host:fetch"]}, format="json")
    assert granted.status_code == 200, granted.content
    assert deploy(api_client, plugin, 2).status_code == 200


def test_a_deploy_can_grant_what_the_version_asks_for(api_client, install):
    plugin = install(appender("-v1"))
    draft(api_client, plugin, FETCHER)
    response = deploy(api_client, plugin, 2, grant=["host:ssh:command"])
    assert response.status_code == 400 and response.json()["error"]["field"] == "grant"
    response = deploy(api_client, plugin, 2, grant=["host:fetch"])
    assert response.status_code == 200, response.content
    assert response.json()["plugin"]["granted"] == ["host:fetch"]


def test_a_new_hook_joins_its_chain_on_deploy_and_leaves_it_on_rollback(api_client, install):
    plugin = install(appender("-v1"))
    both = appender("-v2") + "\nglobalThis.middleware.userMessageInbound = async (c, t) => t.cancel('no');"
    draft(api_client, plugin, both)
    assert deploy(api_client, plugin, 2).status_code == 200
    assert set(ChainEntry.objects.filter(installation=plugin).values_list("hook", flat=True)) == {
        "systemPrompt", "userMessageInbound"}
    assert execute(api_client, "userMessageInbound", INBOUND)["outcome"] == "cancelled"
    api_client.post(f"/api/v1/plugins/{plugin.pk}/rollback")
    assert list(ChainEntry.objects.filter(installation=plugin).values_list("hook", flat=True)) == ["systemPrompt"]
    assert execute(api_client, "userMessageInbound", INBOUND)["outcome"] == "unchanged"


def test_cancel_log_rows_and_warnings_record_the_version(api_client, install, account):
    veto = install("globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('v1 says no');")
    execute(api_client, "userMessageInbound", INBOUND)
    draft(api_client, veto, "globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('v2 says no');")
    deploy(api_client, veto, 2)
    execute(api_client, "userMessageInbound", INBOUND)
    assert list(CancelLog.objects.order_by("id").values_list("reason", "plugin_version")) == [
        ("v1 says no", 1), ("v2 says no", 2)]
    listed = api_client.get("/api/v1/cancellations").json()["results"]
    assert [(r["reason"], r["pluginVersion"]) for r in listed] == [("v2 says no", 2), ("v1 says no", 1)]

    draft(api_client, veto, "globalThis.middleware.userMessageInbound = async () => { throw new Error('v3 broke'); };")
    deploy(api_client, veto, 3)
    execute(api_client, "userMessageInbound", INBOUND)
    warning = HandlerWarning.objects.get(account=account)
    assert (warning.kind, warning.plugin_version) == ("error", 3)
    assert api_client.get("/api/v1/warnings").json()["results"][0]["pluginVersion"] == 3


def test_bad_deploys_are_4xx_and_change_nothing(api_client, other_api_client, install, account, other_account):
    first, second = install(appender("-a")), install(appender("-b"))
    draft(api_client, first, appender("-a2"))
    foreign = install(appender("-x"), target=other_account)
    snapshot = (list(Installation.objects.order_by("pk").values_list("pk", "live_version")),
                AccountChange.objects.count(), type(account).objects.get(pk=account.pk).hooks_version)
    # Version 2 belongs to the first installation; the second has no version 2.
    response = deploy(api_client, second, 2)
    assert response.status_code == 404 and "has no version 2" in response.json()["error"]["message"]
    assert deploy(api_client, first, 7).status_code == 404
    assert deploy(api_client, first, "two").status_code == 404
    assert deploy(api_client, foreign, 1).status_code == 404
    assert other_api_client.post(f"/api/v1/plugins/{first.pk}/versions/2/deploy").status_code == 404
    assert api_client.get(f"/api/v1/plugins/{foreign.pk}/versions").status_code == 404
    assert deploy(api_client, first, 2, version=2).status_code == 400   # an unknown body field
    assert draft(api_client, first, "globalThis.middleware.systemPrompt = async (c) => {").status_code == 400
    assert draft(api_client, first, "").status_code == 400
    assert snapshot == (list(Installation.objects.order_by("pk").values_list("pk", "live_version")),
                        AccountChange.objects.count(), type(account).objects.get(pk=account.pk).hooks_version)
    assert prompt(api_client) == "base-a-b"


def test_versions_are_immutable(install):
    version = PluginVersion.objects.get(installation=install(appender("-a")))
    version.source = "changed"
    with pytest.raises(Exception, match="cannot be changed"):
        version.save()


def test_a_catalog_upgrade_is_a_new_live_version_of_each_installation(tmp_path, monkeypatch, api_client, account):
    import shutil

    from plugins_app.services.plugins import catalog
    root = tmp_path / "catalog"
    shutil.copytree(catalog.CATALOG_DIR, root)
    monkeypatch.setattr(catalog, "CATALOG_DIR", root)
    catalog.sync_catalog()
    installation = Installation.objects.get(pk=install_official(api_client, "caveman")["id"])
    manifest = root / "caveman" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"version": "1.0.0"', '"version": "1.0.1"'))
    (root / "caveman" / "index.ts").write_text(appender("|new"))
    catalog.sync_catalog()
    listed = api_client.get(f"/api/v1/plugins/{installation.pk}/versions").json()
    assert listed["live"] == 2
    assert [(v["number"], v["note"], v["createdBy"]) for v in listed["versions"]] == [
        (2, "catalog upgrade 1.0.0 -> 1.0.1", "system"), (1, "installed", "API key tests")]
    assert prompt(api_client) == "base|new"   # the installation runs the upgraded code
    change = AccountChange.objects.get(account=account, action="upgrade")
    assert (change.before["version"], change.after["version"], change.actor_name) == (1, 2, "system")

"""GET /api/v1/catalog, installing official plugins, and PATCH /api/v1/plugins/{id}/settings."""

import pytest

from accounts.models import Account
from plugins_app.models import Installation, Plugin

from ..catalog_support import execute, install_official, patch_settings
from ..conftest import PROMPT

pytestmark = pytest.mark.django_db

HOOKS = {
    "agent-audit": ["interAgentMessage"], "caveman": ["systemPrompt"], "card-mask": ["userMessageInbound"],
    "maintenance-window": ["cronJobFiring"], "rate-limit": ["userMessageInbound"],
    "rm-guard": ["sshCommandSending"], "secret-redactor": ["sshCommandCompleted"],
}


def hooks_version(account):
    return Account.objects.get(pk=account.pk).hooks_version


def test_catalog_lists_the_official_plugins_with_hooks_and_settings(api_client, synced):
    body = api_client.get("/api/v1/catalog").json()
    by_slug = {p["slug"]: p for p in body["plugins"]}
    assert {slug: p["hooks"] for slug, p in by_slug.items()} == HOOKS
    caveman = by_slug["caveman"]
    assert caveman["name"] == "Caveman" and caveman["version"] == "1.0.0" and caveman["description"]
    assert caveman["settings"]["intensity"]["choices"] == ["lite", "full", "ultra"]
    assert caveman["permissions"] == [] and caveman["installed"] is False and caveman["installationId"] is None
    assert [p["name"] for p in body["plugins"]] == sorted(p["name"] for p in body["plugins"])


def test_catalog_says_which_are_installed_in_the_calling_account_only(api_client, other_api_client, synced):
    installed = install_official(api_client, "card-mask")
    mine = {p["slug"]: p for p in api_client.get("/api/v1/catalog").json()["plugins"]}
    theirs = {p["slug"]: p for p in other_api_client.get("/api/v1/catalog").json()["plugins"]}
    assert (mine["card-mask"]["installed"], mine["card-mask"]["installationId"]) == (True, installed["id"])
    assert (theirs["card-mask"]["installed"], theirs["card-mask"]["installationId"]) == (False, None)


def test_the_catalog_needs_an_api_key(client, synced):
    assert client.get("/api/v1/catalog").status_code == 401


def test_installing_from_the_catalog_shares_the_official_plugin(api_client, other_api_client, synced, account):
    mine = install_official(api_client, "caveman")
    theirs = install_official(other_api_client, "caveman", {"intensity": "ultra"})
    assert mine["official"] is True and mine["plugin"] == "caveman" and mine["hooks"] == ["systemPrompt"]
    assert isinstance(mine["id"], str) and isinstance(mine["pluginId"], str)
    assert mine["pluginId"] == theirs["pluginId"] == str(Plugin.objects.get(account=None, slug="caveman").pk)
    assert (mine["settings"], theirs["settings"]) == ({"intensity": "full"}, {"intensity": "ultra"})
    chain = api_client.get("/api/v1/chains/systemPrompt").json()["chain"]
    assert [c["installationId"] for c in chain] == [mine["id"]]
    assert Plugin.objects.filter(slug="caveman").count() == 1


def test_uninstalling_keeps_the_official_plugin(api_client, synced):
    installed = install_official(api_client, "caveman")
    assert api_client.delete(f"/api/v1/plugins/{installed['id']}").status_code == 204
    assert Plugin.objects.filter(account=None, slug="caveman").exists()
    assert install_official(api_client, "caveman")["id"] != installed["id"]


def test_unknown_slug_is_404_and_twice_is_409(api_client, synced):
    response = api_client.post("/api/v1/plugins", {"catalog": "no-such-plugin"}, format="json")
    assert response.status_code == 404
    assert "caveman" in response.json()["error"]["message"]
    install_official(api_client, "caveman")
    assert api_client.post("/api/v1/plugins", {"catalog": "caveman"}, format="json").status_code == 409
    assert Installation.objects.count() == 1


def test_a_custom_plugin_cannot_take_an_official_slug_away(api_client, synced, account):
    custom = api_client.post("/api/v1/plugins", {"name": "caveman", "language": "javascript",
                                                 "source": "globalThis.middleware.systemPrompt = (c) => c.systemPrompt;"},
                             format="json")
    assert custom.status_code == 201
    official = install_official(api_client, "caveman")
    assert official["official"] is True and custom.json()["official"] is False


def test_grants_are_checked_against_the_plugins_permissions(api_client, synced):
    response = api_client.post("/api/v1/plugins", {"catalog": "caveman", "grant": ["host:fetch"]}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "grant"
    assert Installation.objects.count() == 0


@pytest.mark.parametrize("body, field", [
    ({"catalog": "caveman", "settings": {"intensity": 3}}, "settings.intensity"),
    ({"catalog": "caveman", "settings": {"loud": True}}, "settings.loud"),
    ({"catalog": "agent-audit", "settings": {"previewChars": 1.5}}, "settings.previewChars"),
    ({"catalog": "agent-audit", "settings": {"previewChars": True}}, "settings.previewChars"),
    ({"catalog": "agent-audit", "settings": {"redact": "true"}}, "settings.redact"),
    ({"catalog": "secret-redactor", "settings": {"replacement": "x" * 1001}}, "settings.replacement"),
    ({"catalog": "rm-guard", "settings": {"protectedPaths": ["/srv"] * 51}}, "settings.protectedPaths"),
])
def test_invalid_settings_are_400_naming_the_setting(api_client, synced, body, field, account):
    before = hooks_version(account)
    response = api_client.post("/api/v1/plugins", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field
    assert Installation.objects.count() == 0 and hooks_version(account) == before


def test_settings_must_be_an_object(api_client, synced):
    response = api_client.post("/api/v1/plugins", {"catalog": "caveman", "settings": ["full"]}, format="json")
    assert response.status_code == 400 and "settings" in response.json()["error"]["message"]


def test_patch_settings_merges_and_null_resets_to_the_default(api_client, synced, account):
    installed = install_official(api_client, "agent-audit", {"previewChars": 10})
    before = hooks_version(account)
    response = patch_settings(api_client, installed["id"], {"redact": True})
    assert response.status_code == 200, response.content
    assert response.json()["settings"] == {"redact": True, "previewChars": 10, "replacement": "[REDACTED]"}
    assert hooks_version(account) > before
    reset = patch_settings(api_client, installed["id"], {"previewChars": None})
    assert reset.json()["settings"]["previewChars"] == 120
    assert api_client.get(f"/api/v1/plugins/{installed['id']}").json()["settings"] == reset.json()["settings"]


def test_a_bad_patch_changes_nothing(api_client, synced, account):
    installed = install_official(api_client, "agent-audit")
    before = hooks_version(account)
    response = patch_settings(api_client, installed["id"], {"redact": True, "previewChars": -1})
    assert response.status_code == 400 and response.json()["error"]["field"] == "settings.previewChars"
    assert Installation.objects.get(pk=installed["id"]).settings == installed["settings"]
    assert hooks_version(account) == before
    missing = api_client.patch(f"/api/v1/plugins/{installed['id']}/settings", {"redact": True}, format="json")
    assert missing.status_code == 400 and missing.json()["error"]["field"] == "settings"


def test_what_get_answers_can_be_sent_back(api_client, synced):
    installed = install_official(api_client, "maintenance-window", {"start": "01:00", "end": "02:00"})
    settings = installed["settings"]
    assert "utcOffsets" in settings
    response = patch_settings(api_client, installed["id"], dict(settings, end="03:00", utcOffsets=[[0, 999]]))
    assert response.status_code == 200, response.content
    assert response.json()["settings"] == dict(settings, end="03:00")   # computed, not taken from the request


def test_a_custom_install_with_settings_is_refused(api_client):
    response = api_client.post("/api/v1/plugins", {"name": "mine", "language": "javascript", "settings": {"a": 1},
                                                   "source": "globalThis.middleware.systemPrompt = (c) => c.systemPrompt;"},
                               format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"settings": ["only official (catalog) plugins take settings"]}
    assert Installation.objects.count() == 0


def test_patch_settings_of_another_accounts_installation_is_404(api_client, other_api_client, synced):
    installed = install_official(other_api_client, "caveman")
    assert patch_settings(api_client, installed["id"], {"intensity": "lite"}).status_code == 404
    assert patch_settings(api_client, "nope", {"intensity": "lite"}).status_code == 404
    assert Installation.objects.get(pk=installed["id"]).settings == {"intensity": "full"}


def test_a_custom_plugin_takes_no_settings(api_client, synced):
    custom = api_client.post("/api/v1/plugins", {"name": "mine", "language": "javascript",
                                                 "source": "globalThis.middleware.systemPrompt = (c) => c.systemPrompt;"},
                             format="json").json()
    response = patch_settings(api_client, custom["id"], {"anything": 1})
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "settings.anything"
    assert "no settings" in response.json()["error"]["message"]


def test_host_config_is_read_only_inside_the_plugin(api_client, install, account):
    probe = install("""
        globalThis.middleware.systemPrompt = async (c) => {
          let threw = false;
          try { host.config.intensity = "changed"; } catch (e) { threw = true; }
          return `${c.systemPrompt}|${host.config.intensity}|${threw}|${Object.isFrozen(host.config)}`;
        };""")
    Installation.objects.filter(pk=probe.pk).update(settings={"intensity": "lite"})
    Account.objects.filter(pk=account.pk).update(hooks_version=hooks_version(account) + 1)
    assert execute(api_client, "systemPrompt", PROMPT)["value"] == "base|lite|true|true"
    assert execute(api_client, "systemPrompt", PROMPT)["value"] == "base|lite|true|true"

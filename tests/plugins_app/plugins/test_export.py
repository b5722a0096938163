"""GET /api/v1/account/export: the account's state for `hub export`, scoped, stable, without secrets."""

from __future__ import annotations

from plugins_app.models import Installation
from plugins_app.services.plugins.export import exportable_settings
from tests.plugins_app.catalog_support import install_official

WINDOW = {"start": "22:00", "end": "06:00", "timeZone": "Europe/Berlin"}


def test_the_export_lists_installations_and_chains_without_computed_settings(api_client, other_api_client,
                                                                             synced, install, other_account):
    install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '!';", name="Bang")
    window = install_official(api_client, "maintenance-window", WINDOW)
    install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;", name="theirs",
            target=other_account)
    answer = api_client.get("/api/v1/account/export").json()
    assert [p["plugin"] for p in answer["plugins"]] == ["bang", "maintenance-window"]
    bang, official = answer["plugins"]
    assert bang["source"].endswith("'!';\n") and bang["liveVersion"] == 1 and not bang["official"]
    assert official["catalogVersion"] and "source" not in official
    assert official["settings"]["start"] == "22:00" and "utcOffsets" not in official["settings"]
    assert "utcOffsets" in Installation.objects.get(pk=window["installationId"]).settings
    assert answer["chains"] == {"systemPrompt": ["bang"], "cronJobFiring": ["maintenance-window"]}
    assert api_client.get("/api/v1/account/export").content == api_client.get("/api/v1/account/export").content
    assert [p["plugin"] for p in other_api_client.get("/api/v1/account/export").json()["plugins"]] == ["theirs"]


def test_settings_marked_secret_never_leave_and_placeholders_stay_text():
    schema = {"token": {"type": "string", "secret": True}, "url": {"type": "string"},
              "zone": {"type": "string", "format": "timeZone", "offsets": "zoneOffsets"}}
    values = {"token": "s3cr3t", "url": "https://x/{{secret.API_TOKEN}}", "zone": "UTC", "zoneOffsets": [[0, 0]]}
    assert exportable_settings(schema, values) == {"url": "https://x/{{secret.API_TOKEN}}", "zone": "UTC"}

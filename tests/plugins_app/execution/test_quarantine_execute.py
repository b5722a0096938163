"""Quarantine through the execute API: strikes from real wedges, skipping, the warning, release."""

from dataclasses import replace

import pytest

from plugins_app.models import HandlerWarning, Installation, Plugin, UsageDaily
from plugins_app.services.plugins.chains import mark_changed

from ..conftest import PROMPT, appender

WEDGE = "globalThis.middleware.systemPrompt = async (c) => { await null; while (true) {} };"


def execute(api_client):
    response = api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.slow
def test_three_wedges_quarantine_the_installation_and_release_brings_it_back(api_client, install, account, settings):
    settings.HUB_ENGINE = replace(settings.HUB_ENGINE, budget_ms=300)
    settings.HUB_QUARANTINE = replace(settings.HUB_QUARANTINE, strikes=3)
    wedge = install(WEDGE, name="runaway")
    install(appender("+"), name="good")
    marker = account.hooks_version

    first = execute(api_client)
    assert [t["status"] for t in first["trace"]] == ["timeout", "ran"]
    assert first["value"] == "base+"
    wedge.refresh_from_db()
    account.refresh_from_db()
    # Known to every process from the next call on: stored, and the change marker moved.
    assert wedge.slow_lane_until is not None and account.hooks_version > marker

    for _ in range(2):
        assert execute(api_client)["trace"][0]["status"] == "timeout"
    wedge.refresh_from_db()
    assert wedge.quarantined_until is not None

    skipped = [execute(api_client) for _ in range(2)]
    assert all(s["trace"][0]["status"] == "quarantined" and s["value"] == "base+" for s in skipped)
    assert HandlerWarning.objects.filter(installation=wedge, kind="quarantined").count() == 1
    # Metered only when a handler actually ran: the three wedges, not the two skips.
    assert UsageDaily.objects.get(account=account, plugin_slug=wedge.plugin.slug).runs == 3

    detail = api_client.get(f"/api/v1/plugins/{wedge.pk}").json()
    assert detail["quarantine"]["quarantined"] is True

    assert api_client.post(f"/api/v1/plugins/{wedge.pk}/release").status_code == 200
    assert execute(api_client)["trace"][0]["status"] == "timeout"   # it runs again (and still wedges)
    assert Installation.objects.get(pk=wedge.pk).quarantined_until is None


@pytest.mark.slow
def test_code_that_wedges_whenever_it_loads_counts_like_a_wedge_and_is_quarantined(api_client, install, account,
                                                                                     settings):
    settings.HUB_QUARANTINE = replace(settings.HUB_QUARANTINE, strikes=3)
    looper = install(appender("!"), name="looper")
    install(appender("+"), name="good")
    # Top-level code that never ends once it is past the install-time probe (stored directly here).
    Plugin.objects.filter(pk=looper.plugin_id).update(compiled_js="while (true) {}", code_hash="f" * 64)
    mark_changed(account.pk)

    for _ in range(3):
        trace = execute(api_client)["trace"]
        assert (trace[0]["status"], "did not finish" in trace[0]["warning"]) == ("timeout", True)
    looper.refresh_from_db()
    assert looper.quarantined_until is not None
    # Skipped from now on, without loading (and so without costing the engine its isolate again).
    skipped = execute(api_client)
    assert skipped["trace"][0]["status"] == "quarantined" and skipped["value"] == "base+"


@pytest.mark.slow
def test_a_wedge_uninstalled_and_installed_again_through_the_api_keeps_its_strikes(api_client, account, settings):
    # Issue 39, item 2, end to end: the tenant that reinstalls its bomb after every call. Each round
    # installs the same source through the API, executes once (a real wedge, a real strike) and
    # uninstalls; the strikes add up across the installations and the fourth is quarantined at once.
    settings.HUB_ENGINE = replace(settings.HUB_ENGINE, budget_ms=300)
    settings.HUB_QUARANTINE = replace(settings.HUB_QUARANTINE, strikes=3)
    seen = []
    for _ in range(3):
        created = api_client.post("/api/v1/plugins", {"name": "Runaway", "source": WEDGE, "language": "javascript"},
                                  format="json")
        assert created.status_code == 201, created.content
        installation = created.json()["id"]
        assert execute(api_client)["trace"][0]["status"] == "timeout"
        seen.append(api_client.get(f"/api/v1/plugins/{installation}").json()["quarantine"])
        assert api_client.delete(f"/api/v1/plugins/{installation}").status_code == 204
    assert [q["strikes"] for q in seen[:2]] == [1, 2]   # the third strike quarantines (and clears them)
    assert [q["quarantined"] for q in seen] == [False, False, True]
    assert "timeouts/wedges/memory overruns" in seen[-1]["reason"]
    again = api_client.post("/api/v1/plugins", {"name": "Runaway", "source": WEDGE, "language": "javascript"},
                            format="json").json()
    assert again["quarantine"]["quarantined"] is True
    skipped = execute(api_client)
    assert skipped["trace"][0]["status"] == "quarantined" and skipped["value"] == "base"

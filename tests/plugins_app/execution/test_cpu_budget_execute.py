"""HUB_CPU_MS through the execute API (issue 28): a plugin that burns CPU in timers is stopped with a
warning that says CPU, struck, and quarantined after three calls, while another account's calls run."""

from dataclasses import replace

import pytest

from plugins_app.models import HandlerWarning, Installation

from ..conftest import PROMPT, appender

TIMERS = """const busy = (ms) => { const end = Date.now() + ms; while (Date.now() < end) {} };
globalThis.middleware.systemPrompt = async (c) => {
  await new Promise((resolve) => {
    let left = 999;
    for (let i = 0; i < 999; i++) setTimeout(() => { busy(4); if (--left === 0) resolve(); }, 0);
  });
  return c.systemPrompt + ' (all timers ran)';
};"""


def execute(client):
    response = client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.slow
def test_cpu_spent_in_timers_is_stopped_struck_and_quarantined(api_client, other_api_client, install, other_account,
                                                                 settings):
    # A wall-clock budget far above what the CPU budget allows: only the CPU stops it.
    settings.HUB_ENGINE = replace(settings.HUB_ENGINE, budget_ms=30_000, cpu_ms=200)
    settings.HUB_QUARANTINE = replace(settings.HUB_QUARANTINE, strikes=3)
    burner = install(TIMERS, name="timer burner")
    install(appender("+"), name="victim", target=other_account)

    for _ in range(3):
        answer = execute(api_client)
        assert answer["value"] == "base"
        assert answer["trace"][0]["status"] == "timeout"
        assert "200 ms of CPU" in answer["trace"][0]["warning"]
        victim = execute(other_api_client)   # the other account between the attacker's calls
        assert (victim["value"], victim["trace"][0]["status"]) == ("base+", "ran")

    burner.refresh_from_db()
    assert burner.quarantined_until is not None   # (its strikes are spent on the quarantine)
    warnings = HandlerWarning.objects.filter(installation=burner, kind="timeout")
    assert warnings.count() == 3 and all("CPU" in w.message for w in warnings)
    assert execute(api_client)["trace"][0]["status"] == "quarantined"
    [victim_installation] = Installation.objects.filter(account=other_account)
    assert (victim_installation.strikes, victim_installation.quarantined_until) == ([], None)

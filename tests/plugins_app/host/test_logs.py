"""host.log: lines stored per installation, capped with the oldest pruned, listed by GET /api/v1/logs."""

from dataclasses import replace

import pytest

from plugins_app.models import PluginLog
from plugins_app.services.execution import execute as execution
from plugins_app.services.plugins import installations as plugins

from ..conftest import PROMPT
from .stubs import execute

pytestmark = pytest.mark.django_db

LOGGER = """
globalThis.middleware.systemPrompt = async (c) => {
  host.log("warn", `run ${c.systemPrompt} for agent ${c.agentId}`);
  console.log("console", c.systemPrompt);
  host.log("shout", "unknown levels become info");
  return c.systemPrompt;
};
"""


def test_log_lines_are_stored_with_their_installation_and_hook(api_client, install, account):
    installation = install(LOGGER, name="logger")
    execute(api_client, "systemPrompt", dict(PROMPT, systemPrompt="1"))
    rows = list(PluginLog.objects.order_by("id").values_list("installation_id", "plugin_slug", "hook", "level", "message"))
    assert rows == [
        (installation.pk, "logger", "systemPrompt", "warn", "run 1 for agent 2"),
        (installation.pk, "logger", "systemPrompt", "info", "console 1"),
        (installation.pk, "logger", "systemPrompt", "info", "unknown levels become info"),
    ]


def test_logs_are_listed_newest_first_and_filtered(api_client, install):
    logger = install(LOGGER, name="logger")
    install("globalThis.middleware.userMessageInbound = async (c) => { host.log('error', 'inbound!'); return c.text; };",
            name="inbound")
    execute(api_client, "systemPrompt", dict(PROMPT, systemPrompt="1"))
    execute(api_client, "userMessageInbound", {"sessionId": "1", "channelId": None, "text": "t", "mediaIds": []})
    body = api_client.get("/api/v1/logs").json()
    assert body["count"] == 4
    first = body["results"][0]
    assert first == dict(first, plugin="inbound", hook="userMessageInbound", level="error", message="inbound!")
    assert isinstance(first["id"], str) and isinstance(first["installationId"], str)

    def messages(query):
        return [r["message"] for r in api_client.get(f"/api/v1/logs?{query}").json()["results"]]
    assert messages("level=warn") == ["run 1 for agent 2"]
    assert messages("plugin=inbound") == ["inbound!"]
    assert messages("hook=systemPrompt&level=info") == ["unknown levels become info", "console 1"]
    assert len(messages(f"installationId={logger.pk}")) == 3
    assert len(messages("pageSize=2")) == 2


@pytest.mark.parametrize("query, status, field", [
    ("level=loud", 400, "level"),
    ("installationId=abc", 400, "installationId"),
    ("hook=noSuchHook", 404, None),
])
def test_bad_filters_are_refused(api_client, query, status, field):
    response = api_client.get(f"/api/v1/logs?{query}")
    assert response.status_code == status
    assert response.json()["error"].get("field") == field


def test_each_installation_keeps_only_its_newest_lines(api_client, install, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, plugin_log_limit=4)
    logger = install(LOGGER, name="logger")
    other = install("globalThis.middleware.systemPrompt = async (c) => { host.log('info', 'other'); return c.systemPrompt; };",
                    name="other")
    for n in range(1, 4):
        execute(api_client, "systemPrompt", dict(PROMPT, systemPrompt=str(n)))
    kept = list(PluginLog.objects.filter(installation=logger).order_by("id").values_list("message", flat=True))
    assert kept == ["unknown levels become info", "run 3 for agent 2", "console 3", "unknown levels become info"]
    assert PluginLog.objects.filter(installation=other).count() == 3


def test_logs_are_per_account(api_client, other_api_client, install):
    install(LOGGER)
    execute(api_client, "systemPrompt", PROMPT)
    assert other_api_client.get("/api/v1/logs").json()["count"] == 0


def test_a_try_run_stores_no_logs(account, install):
    install(LOGGER)
    result, _ = execution.execute_hook(account, "systemPrompt", dict(PROMPT, systemPrompt="1"), record=False)
    assert result.trace[0].logs[0]["message"] == "run 1 for agent 2"
    assert not PluginLog.objects.exists()


def test_uninstalling_keeps_the_lines_without_their_installation(api_client, install, account):
    installation = install(LOGGER, name="logger")
    execute(api_client, "systemPrompt", PROMPT)
    plugins.uninstall(account, installation.pk)
    assert set(PluginLog.objects.values_list("installation_id", flat=True)) == {None}
    assert {r["plugin"] for r in api_client.get("/api/v1/logs").json()["results"]} == {"logger"}

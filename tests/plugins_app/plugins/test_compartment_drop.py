"""Uninstalling, disabling or redeploying a plugin drops its compartments on every engine (issue 28,
item 3): what its module state held goes back at once, and its next run starts afresh."""

import time
import uuid

from plugins_app.services.engine.tier import get_tier

from ..conftest import PROMPT

MIB = 1024 * 1024
HOARD_MIB = 192
HOARDER = f"""const keep = [];
globalThis.middleware.systemPrompt = async (c) => {{
  if (keep.length === 0) for (let i = 0; i < {HOARD_MIB // 64}; i++) {{ const u = new Uint8Array(64 * 1024 * 1024); u.fill(7); keep.push(u); }}
  return c.systemPrompt;
}};"""


def counter_source() -> str:
    # Unique code: a test database reuses ids after a rollback, and an engine keeps a compartment
    # of the same account, id and code for the next test otherwise.
    return f"""// {uuid.uuid4()}
let calls = 0;
globalThis.middleware.systemPrompt = async (c) => `${{c.systemPrompt}}:${{++calls}}`;"""


def execute(client):
    response = client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def engines_rss() -> int:
    tier = get_tier()
    return sum(tier.ping(address)["rssBytes"] for address in tier.addresses)


def test_deleting_a_plugin_gives_its_memory_back_on_the_engines(api_client, install,
                                                                django_capture_on_commit_callbacks):
    hoarder = install(HOARDER, name="hoarder")
    before = engines_rss()
    assert execute(api_client)["trace"][0]["status"] == "ran"
    assert engines_rss() - before > 0.9 * HOARD_MIB * MIB

    with django_capture_on_commit_callbacks(execute=True):
        assert api_client.delete(f"/api/v1/plugins/{hoarder.pk}").status_code == 204
    deadline = time.monotonic() + 10
    while engines_rss() - before > 0.2 * HOARD_MIB * MIB:
        assert time.monotonic() < deadline, "the engines kept the uninstalled plugin's memory for 10 s"
        time.sleep(0.2)


def test_disabling_drops_the_state_and_enabling_starts_afresh(api_client, install, django_capture_on_commit_callbacks):
    counter = install(counter_source(), name="counter")
    assert [execute(api_client)["value"] for _ in range(2)] == ["base:1", "base:2"]
    with django_capture_on_commit_callbacks(execute=True):
        assert api_client.patch(f"/api/v1/plugins/{counter.pk}", {"enabled": False}, format="json").status_code == 200
    assert execute(api_client)["value"] == "base"
    with django_capture_on_commit_callbacks(execute=True):
        assert api_client.patch(f"/api/v1/plugins/{counter.pk}", {"enabled": True}, format="json").status_code == 200
    assert execute(api_client)["value"] == "base:1"


def test_a_rolled_back_transaction_drops_nothing(api_client, install, django_capture_on_commit_callbacks):
    counter = install(counter_source(), name="counter")
    assert execute(api_client)["value"] == "base:1"
    # A bad disable (not a boolean) changes nothing and must not cost the plugin its state either.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert api_client.patch(f"/api/v1/plugins/{counter.pk}", {"enabled": "no"}, format="json").status_code == 400
    assert callbacks == []
    assert execute(api_client)["value"] == "base:2"


def test_a_deploy_drops_the_old_versions_compartments_everywhere(api_client, install, account,
                                                               django_capture_on_commit_callbacks):
    counter = install(counter_source(), name="counter")
    assert execute(api_client)["value"] == "base:1"
    tier = get_tier()

    def compartments() -> int:   # across the engines (earlier tests' may be there too)
        return sum(tier.ping(address)["compartments"] for address in tier.addresses)

    before = compartments()
    with django_capture_on_commit_callbacks(execute=True):
        assert api_client.post(f"/api/v1/plugins/{counter.pk}/versions",
                               {"source": counter_source(), "language": "javascript"}, format="json").status_code == 201
        assert api_client.post(f"/api/v1/plugins/{counter.pk}/versions/2/deploy").status_code == 200
    assert compartments() <= before - 1   # the engine that ran version 1 dropped it (and any other held it)
    assert execute(api_client)["value"] == "base:1"   # version 2, from a fresh compartment

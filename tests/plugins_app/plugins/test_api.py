"""Installing, listing, reordering and removing plugins through the API."""

import pytest

from plugins_app.models import ChainEntry, Plugin

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

TS_PLUGIN = """
const SUFFIX: string = "!";
globalThis.middleware.systemPrompt = async (context: { systemPrompt: string }) => context.systemPrompt + SUFFIX;
globalThis.middleware.userMessageInbound = async (context, tools) => context.text;
"""


def install(client, source, name="p", language="typescript", **extra):
    return client.post("/api/v1/plugins", {"name": name, "source": source, "language": language, **extra},
                       format="json")


def test_install_typescript_discovers_hooks_and_appends_to_chains(api_client):
    response = install(api_client, TS_PLUGIN, name="Bang")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["plugin"] == "bang"
    assert body["hooks"] == ["systemPrompt", "userMessageInbound"]
    assert isinstance(body["installationId"], str)
    chain = api_client.get("/api/v1/chains/systemPrompt").json()["chain"]
    assert [c["installationId"] for c in chain] == [body["installationId"]]
    plugin = Plugin.objects.get(slug="bang")
    assert "SUFFIX: string" not in plugin.compiled_js and "SUFFIX" in plugin.compiled_js


def test_a_syntax_error_rejects_the_install_with_line_and_column(api_client):
    response = install(api_client, "const a = 1;\nglobalThis.middleware.systemPrompt = async (c) => {\n  return c.systemPrompt +;\n};")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "compile_error"
    assert error["errors"][0]["line"] == 3
    assert error["errors"][0]["column"] > 1
    assert Plugin.objects.count() == 0


def test_unknown_hook_names_and_empty_plugins_are_rejected(api_client):
    r1 = install(api_client, "globalThis.middleware.systemprompt = async (c) => c.systemPrompt;")
    assert r1.status_code == 400 and "systemprompt is not a hook" in r1.json()["error"]["message"]
    r2 = install(api_client, "const x = 1;")
    assert r2.status_code == 400 and "defines no hooks" in r2.json()["error"]["message"]
    r3 = install(api_client, "import fs from 'fs';\nglobalThis.middleware.systemPrompt = async (c) => c.systemPrompt;")
    assert r3.status_code == 400 and "import" in r3.json()["error"]["message"]


def test_top_level_throw_or_loop_rejects_the_install(api_client):
    r1 = install(api_client, "throw new Error('at load');", language="javascript")
    assert r1.status_code == 400 and "at load" in r1.json()["error"]["message"]
    r2 = install(api_client, "while (true) {}", language="javascript")
    assert r2.status_code == 400 and "did not finish" in r2.json()["error"]["message"]
    assert Plugin.objects.count() == 0


def test_same_name_twice_is_409(api_client):
    assert install(api_client, TS_PLUGIN, name="dup").status_code == 201
    response = install(api_client, TS_PLUGIN, name="dup")
    assert response.status_code == 409
    assert Plugin.objects.count() == 1


def test_missing_source_is_400_naming_it(api_client):
    response = api_client.post("/api/v1/plugins", {"name": "x"}, format="json")
    assert response.status_code == 400
    assert "source" in response.json()["error"]["message"]


def test_reorder_takes_effect_on_the_next_call(api_client):
    a = install(api_client, appender("A"), name="a", language="javascript").json()["installationId"]
    b = install(api_client, appender("B"), name="b", language="javascript").json()["installationId"]
    run = lambda: api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json").json()
    assert run()["value"] == "baseAB"
    response = api_client.put("/api/v1/chains/systemPrompt", {"order": [b, a]}, format="json")
    assert response.status_code == 200
    assert [c["installationId"] for c in response.json()["chain"]] == [b, a]
    assert run()["value"] == "baseBA"
    api_client.put("/api/v1/chains/systemPrompt", {"installationId": a, "position": 0}, format="json")
    assert run()["value"] == "baseAB"


def test_a_bad_order_is_400_and_changes_nothing(api_client):
    a = install(api_client, appender("A"), name="a", language="javascript").json()["installationId"]
    b = install(api_client, appender("B"), name="b", language="javascript").json()["installationId"]
    for order in ([a], [a, a, b], [a, b, "999"], "nope", [1, 2]):
        assert api_client.put("/api/v1/chains/systemPrompt", {"order": order}, format="json").status_code == 400
    assert [e.installation_id for e in ChainEntry.objects.filter(hook="systemPrompt")] == [int(a), int(b)]


def test_disable_keeps_the_place_in_the_chain(api_client):
    a = install(api_client, appender("A"), name="a", language="javascript").json()["installationId"]
    install(api_client, appender("B"), name="b", language="javascript")
    run = lambda: api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json").json()
    api_client.patch(f"/api/v1/plugins/{a}", {"enabled": False}, format="json")
    assert run()["value"] == "baseB"
    api_client.patch(f"/api/v1/plugins/{a}", {"enabled": True}, format="json")
    assert run()["value"] == "baseAB"


def test_delete_removes_from_chains(api_client):
    a = install(api_client, appender("A"), name="a", language="javascript").json()["installationId"]
    assert api_client.delete(f"/api/v1/plugins/{a}").status_code == 204
    assert api_client.get("/api/v1/chains/systemPrompt").json()["chain"] == []
    assert api_client.delete(f"/api/v1/plugins/{a}").status_code == 404


def test_another_accounts_objects_are_404(api_client, other_api_client):
    a = install(api_client, appender("A"), name="a", language="javascript").json()["installationId"]
    assert other_api_client.get(f"/api/v1/plugins/{a}").status_code == 404
    assert other_api_client.delete(f"/api/v1/plugins/{a}").status_code == 404
    assert other_api_client.put("/api/v1/chains/systemPrompt", {"order": [a]}, format="json").status_code == 400
    assert other_api_client.get("/api/v1/plugins").json()["plugins"] == []
    assert api_client.get(f"/api/v1/plugins/{a}").status_code == 200

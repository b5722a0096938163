"""The OpenAPI schema and docs are served without a key and describe every hook's context."""

import pytest
import yaml

from plugins_app.runtime.tables.hooks import HOOKS

pytestmark = pytest.mark.django_db


def test_schema_has_a_context_per_hook_built_from_the_table(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    components = schema["components"]["schemas"]
    prompt = components["SystemPromptContext"]
    assert prompt["required"] == ["sessionId", "agentId", "sessionKind", "systemPrompt"]
    assert components["SshCommandSendingContext"]["properties"]["kind"]["enum"][0] == "command"
    assert "intent" not in components["SshCommandSendingContext"]["required"]
    assert sum(1 for name in components if name.endswith("Context")) == len(HOOKS)
    execute = schema["paths"]["/api/v1/hooks/{hook}/execute"]["post"]
    hook_param = next(p for p in execute["parameters"] if p["name"] == "hook")
    assert len(hook_param["schema"]["enum"]) == len(HOOKS)


def test_docs_page_uses_bundled_swagger_ui(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    assert b"cdn" not in response.content.lower()
    assert b"swagger" in response.content.lower()


def test_schema_generates_without_errors_or_warnings(tmp_path):
    from django.core.management import call_command
    target = tmp_path / "schema.yml"
    call_command("spectacular", "--fail-on-warn", "--validate", "--file", str(target))
    assert "/api/v1/hooks/{hook}/execute" in target.read_text()


def _operations(schema):
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            yield method, path, op


def test_every_operation_has_a_summary_a_tag_and_its_error_answers(client):
    schema = yaml.safe_load(client.get("/api/schema/").content)
    error = schema["components"]["schemas"]["Error"]
    assert error["properties"]["error"]["required"] == ["code", "message", "field"]
    tags = {tag["name"] for tag in schema["tags"]}
    for method, path, op in _operations(schema):
        assert op.get("summary"), (method, path)
        assert len(op["tags"]) == 1 and op["tags"][0] in tags, (method, path)
        for status in ("400", "401"):
            assert op["responses"][status]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/Error"}, (method, path, status)
        if "requestBody" in op:
            assert {"413", "415"} <= set(op["responses"]), (method, path)
        if "{" in path:
            assert "404" in op["responses"], (method, path)
    assert "409" in schema["paths"]["/api/v1/plugins"]["post"]["responses"]


def test_paginated_lists_are_documented_as_pages(client):
    schema = yaml.safe_load(client.get("/api/schema/").content)
    components = schema["components"]["schemas"]
    for path in ("/api/v1/agents", "/api/v1/cancellations", "/api/v1/cron-jobs", "/api/v1/logs"):
        ref = schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        page = components[ref.rsplit("/", 1)[1]]
        assert {"count", "next", "previous", "results"} <= set(page["properties"]), path


def test_each_hooks_execute_example_is_real_and_runs(client, api_client):
    """The docs' execute examples come from the hook table's samples, and each one is a body the
    execute operation accepts for its hook."""
    schema = yaml.safe_load(client.get("/api/schema/").content)
    content = schema["paths"]["/api/v1/hooks/{hook}/execute"]["post"]["requestBody"]["content"]["application/json"]
    examples = content["examples"]
    assert len(examples) == 14
    for hook, example in examples.items():
        context = example["value"]["context"]
        assert "example" not in context.values() and "string" not in context.values()
        assert schema["components"]["schemas"][hook[0].upper() + hook[1:] + "Context"]["example"] == context
        response = api_client.post(f"/api/v1/hooks/{hook}/execute", example["value"], format="json")
        assert response.status_code == 200, (hook, response.content)
        assert response.json()["hook"] == hook


def test_hop_and_turn_id_are_typed(client):
    schema = yaml.safe_load(client.get("/api/schema/").content)
    body = schema["components"]["schemas"]["ExecuteRequest"]["properties"]
    assert (body["hop"]["type"], body["hop"]["minimum"], body["hop"]["maximum"]) == ("integer", 0, 64)
    assert (body["turnId"]["type"], body["turnId"]["maxLength"]) == ("string", 64)


def test_ids_that_may_be_null_are_documented_as_nullable(client, api_client, install, account):
    # Issue 33 (found by Schemathesis): an uninstalled plugin's changes carry installationId null,
    # documented as a plain string.
    from plugins_app.services.plugins import installations as plugins
    installation = install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;", name="gone")
    plugins.uninstall(account, installation.pk)
    changes = api_client.get("/api/v1/changes").json()["results"]
    assert any(c["installationId"] is None for c in changes)
    components = yaml.safe_load(client.get("/api/schema/").content)["components"]["schemas"]
    for name in ("Change", "CancelLog", "HandlerWarning", "PluginLog"):
        assert components[name]["properties"]["installationId"].get("nullable") is True, name
    assert components["Change"]["properties"]["id"].get("nullable") is not True


def test_registering_an_agent_documents_both_its_answers(client, api_client):
    schema = yaml.safe_load(client.get("/api/schema/").content)
    responses = schema["paths"]["/api/v1/agents/{agent_id}"]["put"]["responses"]
    assert {"200", "201"} <= set(responses)
    first = api_client.put("/api/v1/agents/7", {"name": "Ada"}, format="json")
    again = api_client.put("/api/v1/agents/7", {"name": "Ada L."}, format="json")
    assert (first.status_code, again.status_code) == (201, 200)


def test_the_docs_explain_execute_its_outcomes_and_each_error(client, api_client):
    # Issue 33: execute had no prose, outcomes read "unchanged - unchanged", error examples were "string".
    schema = yaml.safe_load(client.get("/api/schema/").content)
    execute = schema["paths"]["/api/v1/hooks/{hook}/execute"]["post"]
    assert "Fail-open" in execute["description"] and "chain order" in execute["description"]
    outcome = schema["components"]["schemas"]["ExecuteResponseOutcomeEnum"]["description"]
    assert "`unchanged` - unchanged" not in outcome and "do not go on" in outcome
    from plugins_app.api.schema import ERROR_CODES, ERROR_EXAMPLES
    for method, path, op in _operations(schema):
        for status, answer in op["responses"].items():
            if int(status) < 400:
                continue
            example = answer["content"]["application/json"]["example"]["error"]
            assert example["code"] in ERROR_CODES[int(status)] and example["message"] != "string", (method, path)
            assert all(f"`{code}`" in answer["description"] for code in ERROR_CODES[int(status)])
    # The examples are the answers the hub gives.
    for status, response in ((401, client.get("/api/v1/changes")),
                             (404, api_client.get("/api/v1/plugins/42")),
                             (400, api_client.post("/api/v1/hooks/systemPrompt/execute",
                                                   {"context": {"sessionId": "1", "agentId": "2", "sessionKind": "direct",
                                                                "systemPrompt": 5}}, format="json"))):
        assert response.status_code == status
        assert response.json()["error"] == ERROR_EXAMPLES[status], status


def test_no_choice_is_described_by_its_own_value(client):
    text = client.get("/api/schema/").content.decode()
    import re
    assert not re.search(r"\* `([^`]+)` - \1\n", text + "\n")

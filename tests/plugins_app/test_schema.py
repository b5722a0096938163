"""The OpenAPI schema and docs are served without a key and describe every hook's context."""

import pytest
import yaml

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
    assert sum(1 for name in components if name.endswith("Context")) == 14
    execute = schema["paths"]["/api/v1/hooks/{hook}/execute"]["post"]
    hook_param = next(p for p in execute["parameters"] if p["name"] == "hook")
    assert len(hook_param["schema"]["enum"]) == 14


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

"""Type checking against the SDK: "typecheck": true on install and on a draft refuses a TypeScript type
error with its line and column (400 type_error), changes nothing, and leaves JavaScript alone."""

import pytest

from plugins_app.models import Installation, Plugin, PluginVersion

pytestmark = pytest.mark.django_db

TYPO = "// greets\nglobalThis.middleware.systemPrompt = async (c) => {\n  return c.systemPrompt + c.txet;\n};\n"
GOOD = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '!';\n"


def install(client, source, language="typescript", **extra):
    return client.post("/api/v1/plugins", {"name": "Typed", "language": language, "source": source, **extra},
                       format="json")


def test_a_type_error_is_refused_with_its_line_and_column(api_client):
    response = install(api_client, TYPO, typecheck=True)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "type_error"
    assert error["errors"][0]["line"] == 3
    assert error["errors"][0]["column"] == TYPO.splitlines()[2].index("txet") + 1
    assert "txet" in error["errors"][0]["message"] and "SystemPromptContext" in error["errors"][0]["message"]
    assert set(error["errors"][0]) == {"message", "line", "column"}
    assert not Plugin.objects.exists() and not Installation.objects.exists()


def test_without_typecheck_the_same_source_installs(api_client):
    assert install(api_client, TYPO).status_code == 201


def test_a_well_typed_plugin_installs_with_typecheck(api_client):
    response = install(api_client, GOOD, typecheck=True)
    assert response.status_code == 201, response.content


def test_javascript_is_not_type_checked(api_client):
    response = install(api_client, TYPO, language="javascript", typecheck=True)
    assert response.status_code == 201, response.content


def test_a_syntax_error_stays_a_compile_error(api_client):
    response = install(api_client, "globalThis.middleware.systemPrompt = (c) => {", typecheck=True)
    assert response.json()["error"]["code"] == "compile_error"


def test_typecheck_must_be_a_boolean(api_client):
    response = install(api_client, GOOD, typecheck="maybe")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "typecheck"


def test_a_draft_with_a_type_error_is_refused_and_no_version_is_saved(api_client):
    installation_id = install(api_client, GOOD).json()["installationId"]
    response = api_client.post(f"/api/v1/plugins/{installation_id}/versions",
                               {"source": TYPO, "language": "typescript", "typecheck": True}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "type_error"
    assert response.json()["error"]["errors"][0]["line"] == 3
    assert PluginVersion.objects.filter(installation_id=installation_id).count() == 1
    fixed = api_client.post(f"/api/v1/plugins/{installation_id}/versions",
                            {"source": TYPO.replace("txet", "systemPrompt"), "language": "typescript",
                             "typecheck": True}, format="json")
    assert fixed.status_code == 201, fixed.content

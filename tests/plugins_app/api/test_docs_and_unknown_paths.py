"""What /api/docs/ tells the platform's engineer (a key, effects, the bridge's signature, `value` per hook),
the drifts schemathesis found (tail events, the catalog's 404), and unknown /api/v1/ paths answering JSON."""

import pytest
import yaml

from plugins_app.runtime.tables.hooks import HOOKS

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    return yaml.safe_load(response.content)


@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_an_unknown_api_path_answers_the_json_error_with_or_without_a_key(client, api_client, method):
    for caller in (client, api_client):
        response = getattr(caller, method)("/api/v1/plugins/1/nothing-here")
        assert response.status_code == 404
        assert response["Content-Type"].startswith("application/json")
        error = response.json()["error"]
        assert error["code"] == "not_found"
        assert error["message"] == "no API endpoint at /api/v1/plugins/1/nothing-here; the endpoints are listed at /api/docs/"


def test_known_paths_still_answer_as_before(api_client):
    assert api_client.get("/api/v1/ping").status_code == 200
    assert api_client.get("/api/v1/plugins/999999999").json()["error"]["message"].startswith("installation 999999999")


def test_the_introduction_says_how_to_get_a_key_and_check_the_bridge_s_signature(schema):
    text = schema["info"]["description"]
    assert "manage.py create_api_key" in text and "API keys" in text and "Authorization: Bearer" in text
    assert "X-Hub-Signature: sha256=" in text and "HMAC-SHA256" in text and "X-Hub-Timestamp" in text


def test_value_s_shape_is_given_for_every_hook(schema):
    value = schema["components"]["schemas"]["ExecuteResponse"]["properties"]["value"]["description"]
    assert [name for name in HOOKS if f"| `{name}` |" not in value] == []
    observe_only = [name for name, spec in HOOKS.items() if spec.observe_only]
    assert observe_only and all(f"| `{name}` | `null`" in value for name in observe_only)


def test_effects_have_a_schema(schema):
    components = schema["components"]["schemas"]
    effects = components["ExecuteResponse"]["properties"]["effects"]
    assert effects["items"] == {"$ref": "#/components/schemas/Effect"} and "platform" in effects["description"]
    assert {"type", "targetSessionId", "text", "cancelled"} <= set(components["Effect"]["properties"])


def test_tail_events_are_documented_as_objects_not_a_string(schema):
    answer = schema["paths"]["/api/v1/tail"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    assert answer["schema"] == {"$ref": "#/components/schemas/TailEvent"}
    event = schema["components"]["schemas"]["TailEvent"]
    assert {"type", "hook", "plugin", "status", "message", "reason"} <= set(event["properties"])


def test_installing_documents_the_404_of_an_unknown_catalog_slug(schema, api_client):
    assert "404" in schema["paths"]["/api/v1/plugins"]["post"]["responses"]
    answer = api_client.post("/api/v1/plugins", {"catalog": "no-such-plugin"}, format="json")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"

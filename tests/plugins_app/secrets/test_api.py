"""The secrets API: write-only values, names/hosts/who/when listed, bad input answered 400/413 changing nothing."""

import pytest

from plugins_app.models import AccountChange, Secret

pytestmark = pytest.mark.django_db

VALUE = "xoxb-api-7c9d2e4f6a8b0c1d"


def put(client, name, body):
    return client.put(f"/api/v1/secrets/{name}", body, format="json")


def test_put_list_delete_and_the_value_never_comes_back(api_client, account):
    created = put(api_client, "SLACK_TOKEN", {"value": VALUE, "allowedHosts": ["*.slack.com"],
                                              "description": "posts alerts"})
    assert created.status_code == 201, created.content
    assert created.json()["name"] == "SLACK_TOKEN" and created.json()["allowedHosts"] == ["*.slack.com"]
    assert created.json()["setBy"] == "API key tests"
    replaced = put(api_client, "SLACK_TOKEN", {"value": VALUE + "x", "allowedHosts": ["hooks.slack.com"]})
    assert replaced.status_code == 200
    listed = api_client.get("/api/v1/secrets")
    assert listed.status_code == 200
    page = listed.json()
    assert page["count"] == 1 and page["results"][0]["name"] == "SLACK_TOKEN"
    assert set(page["results"][0]) == {"name", "allowedHosts", "description", "setBy", "createdAt", "updatedAt"}
    changes = api_client.get("/api/v1/changes").content.decode()
    for answer in (created.content, replaced.content, listed.content):
        assert VALUE not in answer.decode()
    assert "secret_rotate" in changes and VALUE not in changes
    assert api_client.delete("/api/v1/secrets/SLACK_TOKEN").status_code == 204
    assert api_client.delete("/api/v1/secrets/SLACK_TOKEN").status_code == 404
    assert not Secret.objects.exists()


def test_another_accounts_secrets_are_invisible(api_client, other_api_client):
    assert put(api_client, "TOKEN", {"value": VALUE, "allowedHosts": ["api.example.com"]}).status_code == 201
    assert other_api_client.get("/api/v1/secrets").json()["count"] == 0
    assert other_api_client.delete("/api/v1/secrets/TOKEN").status_code == 404


@pytest.mark.parametrize("name, body, status, field", [
    ("lower", {"value": VALUE, "allowedHosts": ["a.example.com"]}, 400, "name"),
    ("1ABC", {"value": VALUE, "allowedHosts": ["a.example.com"]}, 400, "name"),
    ("A" * 65, {"value": VALUE, "allowedHosts": ["a.example.com"]}, 400, "name"),
    ("TOKEN", {"value": "x" * (8 * 1024 + 1), "allowedHosts": ["a.example.com"]}, 413, "value"),
    ("TOKEN", {"value": "short", "allowedHosts": ["a.example.com"]}, 400, "value"),
    ("TOKEN", {"value": 12345678, "allowedHosts": ["a.example.com"]}, 400, "value"),
    ("TOKEN", {"allowedHosts": ["a.example.com"]}, 400, "value"),
    ("TOKEN", {"value": VALUE}, 400, "allowedHosts"),
    ("TOKEN", {"value": VALUE, "allowedHosts": []}, 400, "allowedHosts"),
    ("TOKEN", {"value": VALUE, "allowedHosts": ["https://a.example.com/x"]}, 400, "allowedHosts"),
    ("TOKEN", {"value": VALUE, "allowedHosts": ["*"]}, 400, "allowedHosts"),
    ("TOKEN", {"value": VALUE, "allowedHosts": ["a.example.com"], "extra": 1}, 400, "extra"),
    ("TOKEN", {"value": VALUE, "allowedHosts": ["a.example.com"], "description": 5}, 400, "description"),
])
def test_bad_input_is_refused_naming_the_field_and_changes_nothing(api_client, name, body, status, field):
    answer = put(api_client, name, body)
    assert answer.status_code == status, answer.content
    assert answer.json()["error"]["field"] == field
    assert not Secret.objects.exists() and not AccountChange.objects.exists()


def test_a_bad_change_to_an_existing_secret_keeps_it(api_client):
    assert put(api_client, "TOKEN", {"value": VALUE, "allowedHosts": ["a.example.com"]}).status_code == 201
    stored = bytes(Secret.objects.get().value_encrypted)
    answer = put(api_client, "TOKEN", {"value": VALUE + "!", "allowedHosts": ["not a host"]})
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "allowedHosts"
    secret = Secret.objects.get()
    assert bytes(secret.value_encrypted) == stored and secret.allowed_hosts == ["a.example.com"]
    assert AccountChange.objects.count() == 1


def test_deleting_a_malformed_name_is_400_and_an_unknown_one_404(api_client):
    bad = api_client.delete("/api/v1/secrets/lower")
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "name"
    assert api_client.delete("/api/v1/secrets/NOPE").status_code == 404

"""API key authentication as wired in settings, through the real API and its schema."""
import pytest
from rest_framework.test import APIClient

from accounts.models import ApiKey

pytestmark = pytest.mark.django_db

HOOKS_URL = "/api/v1/hooks"


def test_hooks_without_key_is_401_with_bearer_challenge():
    response = APIClient().get(HOOKS_URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'


def test_hooks_with_bad_key_is_401(account):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer mh_AAAAAAAA_" + "B" * 32)
    response = client.get(HOOKS_URL)
    assert response.status_code == 401
    assert "invalid or revoked API key" in response.content.decode()


def test_hooks_with_revoked_key_is_401(account):
    api_key, raw = ApiKey.issue(account)
    api_key.revoke()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get(HOOKS_URL).status_code == 401


def test_hooks_with_good_key_is_200(api_client):
    response = api_client.get(HOOKS_URL)
    assert response.status_code == 200


def test_schema_declares_bearer_api_key_security():
    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    scheme = response.json()["components"]["securitySchemes"]["ApiKeyAuth"]
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"

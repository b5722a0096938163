"""Helpers for the catalog tests: a synced catalog, installing official plugins, executing hooks."""

import pytest

from plugins_app.services.plugins import catalog

SSH = {"sessionId": "1", "agentId": "2", "sshHostId": "3", "hostDisplayName": "web-1"}


@pytest.fixture
def synced(db):
    """The official plugins, synced into this test's database."""
    return catalog.sync_catalog()


def install_official(client, slug, settings=None, **extra):
    body = {"catalog": slug, **extra}
    if settings is not None:
        body["settings"] = settings
    response = client.post("/api/v1/plugins", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def execute(client, hook, context):
    response = client.post(f"/api/v1/hooks/{hook}/execute", {"context": context}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def patch_settings(client, installation_id, settings):
    return client.patch(f"/api/v1/plugins/{installation_id}/settings", {"settings": settings}, format="json")


def logs(client, plugin):
    response = client.get("/api/v1/logs", {"plugin": plugin})
    assert response.status_code == 200, response.content
    return [entry["message"] for entry in response.json()["results"]]

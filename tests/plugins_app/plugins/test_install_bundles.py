"""Installing bundled plugins through the API: up to 2 MiB of source, with the execute limit unchanged."""

import json
from pathlib import Path

import pytest

from plugins_app.models import Plugin
from plugins_app.services.plugins.installations import MAX_SOURCE_CHARS

pytestmark = pytest.mark.django_db

BUNDLES = Path(__file__).resolve().parents[2] / "runtime" / "compat" / "bundles"


def big_bundle(size: int) -> str:
    """Real bundles (zod, then marked last: its handler wins) padded to `size` characters with a comment."""
    source = (BUNDLES / "zod.js").read_text() * 6 + (BUNDLES / "marked.js").read_text()
    assert len(source) < size
    return source + "\n/*" + "x" * (size - len(source) - 6) + "*/\n"


def install(client, source):
    return client.post("/api/v1/plugins", {"name": "big", "source": source, "language": "javascript"}, format="json")


def test_a_2_mib_bundle_installs_and_runs(api_client):
    source = big_bundle(MAX_SOURCE_CHARS)
    assert len(source) == 2 * 1024 * 1024
    response = install(api_client, source)
    assert response.status_code == 201, response.content[:500]
    assert response.json()["hooks"] == ["userMessageInbound"]
    executed = api_client.post("/api/v1/hooks/userMessageInbound/execute", {"context": {
        "sessionId": "1", "channelId": None, "text": "**b** <!-- c -->", "mediaIds": []}}, format="json")
    assert executed.status_code == 200, executed.content[:500]
    assert executed.json()["value"] == "<p><strong>b</strong> <!-- c --></p>\n"


def test_a_source_over_2_mib_is_refused_naming_it_and_nothing_is_stored(api_client):
    response = install(api_client, big_bundle(MAX_SOURCE_CHARS + 1))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["field"] == "source" and "2097152 character (2 MiB) limit" in error["message"]
    assert Plugin.objects.count() == 0


def test_the_install_body_limit_is_larger_but_bounded_and_execute_stays_at_1_mib(api_client):
    too_big = install(api_client, "x" * (7 * 1024 * 1024))
    assert too_big.status_code == 413
    assert "6 MiB" in too_big.json()["error"]["message"]
    body = json.dumps({"context": {"sessionId": "1", "channelId": None, "text": "y" * (1024 * 1024 + 10),
                                   "mediaIds": []}})
    executed = api_client.post("/api/v1/hooks/userMessageInbound/execute", body, content_type="application/json")
    assert executed.status_code == 413
    assert "1 MiB" in executed.json()["error"]["message"]
    assert Plugin.objects.count() == 0


def test_the_sdk_declarations_are_served(api_client, client):
    from plugins_app.runtime.tables.sdk_types import middleware_d_ts

    response = api_client.get("/api/v1/sdk/middleware.d.ts")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/typescript")
    assert response.content.decode() == middleware_d_ts()
    assert client.get("/api/v1/sdk/middleware.d.ts").status_code == 401


def test_a_draft_version_may_carry_a_bundle_over_1_mib(api_client):
    small = install(api_client, "globalThis.middleware.userMessageInbound = (c) => c.text;")
    assert small.status_code == 201
    source = big_bundle(1800 * 1024)
    response = api_client.post(f"/api/v1/plugins/{small.json()['installationId']}/versions",
                               {"source": source, "language": "javascript"}, format="json")
    assert response.status_code == 201, response.content[:500]

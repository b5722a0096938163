"""GET and DELETE /api/v1/plugins/{id}/kv: paginated, a prefix filter, secrets redacted, another account's
installation answering 404, and deletions in the change log."""

import pytest
from django.utils import timezone

from plugins_app.models import AccountChange, KvEntry
from plugins_app.services.kv import checks, store
from plugins_app.services.secrets import store as secrets

pytestmark = pytest.mark.django_db

SOURCE = "globalThis.middleware.systemPrompt = (c) => c.systemPrompt;"


@pytest.fixture
def installation(install):
    installation = install(SOURCE)
    ns = store.Namespace(installation.account_id, installation.pk)
    for i in range(5):
        store.put(ns, f"user:{i}", checks.value({"n": i}), None)
    store.put(ns, "token", checks.value("Bearer sk-live-123456"), 60)
    store.incr(ns, "hits", 3, None, None)
    return installation


def test_lists_keys_with_values_sizes_and_expiry(api_client, installation, account):
    secrets.set_secret(account, "API_TOKEN", value="sk-live-123456", allowed_hosts=["example.com"])
    response = api_client.get(f"/api/v1/plugins/{installation.pk}/kv")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 7
    rows = {r["key"]: r for r in body["results"]}
    assert list(rows) == ["hits", "token", "user:0", "user:1", "user:2", "user:3", "user:4"]
    assert rows["hits"]["value"] == 3 and rows["hits"]["size"] == 12 and rows["hits"]["expiresAt"] is None
    assert rows["token"]["value"] == "Bearer [secret API_TOKEN]"
    assert rows["token"]["expiresAt"] is not None
    assert rows["user:1"]["value"] == {"n": 1}


def test_prefix_and_pages(api_client, installation):
    response = api_client.get(f"/api/v1/plugins/{installation.pk}/kv?prefix=user:&pageSize=2&page=2")
    body = response.json()
    assert (body["count"], [r["key"] for r in body["results"]]) == (5, ["user:2", "user:3"])


def test_expired_keys_are_not_listed(api_client, installation):
    KvEntry.objects.filter(key="token").update(expires_at=timezone.now() - timezone.timedelta(seconds=1))
    keys = [r["key"] for r in api_client.get(f"/api/v1/plugins/{installation.pk}/kv").json()["results"]]
    assert "token" not in keys and len(keys) == 6


def test_another_accounts_installation_is_not_found(other_api_client, installation):
    for response in (other_api_client.get(f"/api/v1/plugins/{installation.pk}/kv"),
                     other_api_client.delete(f"/api/v1/plugins/{installation.pk}/kv"),
                     other_api_client.delete(f"/api/v1/plugins/{installation.pk}/kv?key=hits")):
        assert response.status_code == 404, response.content
    assert KvEntry.objects.count() == 7


def test_delete_one_key_then_clear(api_client, installation):
    response = api_client.delete(f"/api/v1/plugins/{installation.pk}/kv?key=hits")
    assert (response.status_code, response.json()) == (200, {"deleted": 1})
    missing = api_client.delete(f"/api/v1/plugins/{installation.pk}/kv?key=hits")
    assert missing.status_code == 404 and "no kv key 'hits'" in missing.json()["error"]["message"]
    bad = api_client.delete(f"/api/v1/plugins/{installation.pk}/kv?key=")
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "key"
    assert KvEntry.objects.count() == 6
    cleared = api_client.delete(f"/api/v1/plugins/{installation.pk}/kv")
    assert (cleared.status_code, cleared.json()) == (200, {"deleted": 6})
    assert not KvEntry.objects.exists()
    assert list(AccountChange.objects.order_by("id").values_list("action", "summary"))[-2:] == [
        ("kv_delete", f"deleted the kv key 'hits' of {installation.plugin.slug}"),
        ("kv_clear", f"cleared the kv store of {installation.plugin.slug} (6 keys)")]


def test_a_bad_prefix_is_refused(api_client, installation):
    response = api_client.get(f"/api/v1/plugins/{installation.pk}/kv?prefix=" + "x" * 600)
    assert response.status_code == 400 and response.json()["error"]["field"] == "prefix"

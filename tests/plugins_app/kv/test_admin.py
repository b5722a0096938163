"""The admin's kv page: values with secrets redacted, auditors read-only, admins delete keys and clear
stores through the change log, another account's keys answer 404."""

import pytest
from django.urls import reverse

from plugins_app.models import AccountChange, KvEntry
from plugins_app.services.kv import checks, store
from plugins_app.services.secrets import store as secrets

pytestmark = pytest.mark.django_db

SOURCE = "globalThis.middleware.systemPrompt = (c) => c.systemPrompt;"
CHANGELIST = "admin:plugins_app_kventry_changelist"


@pytest.fixture
def entries(install, account, other_account):
    mine = install(SOURCE)
    theirs = install(SOURCE, target=other_account)
    for installation, value in ((mine, "Bearer sk-live-123456"), (theirs, "their value")):
        ns = store.Namespace(installation.account_id, installation.pk)
        store.put(ns, "token", checks.value(value), None)
        store.incr(ns, "hits", 4, None, None)
    secrets.set_secret(account, "API_TOKEN", value="sk-live-123456", allowed_hosts=["example.com"])
    return mine, theirs


def test_admins_see_their_keys_with_secrets_redacted(login, entries):
    client = login("acme", "alice", "admin")
    page = client.get(reverse(CHANGELIST)).content.decode()
    assert "Bearer [secret API_TOKEN]" in page and "sk-live-123456" not in page
    assert "their value" not in page
    theirs = KvEntry.objects.get(installation=entries[1], key="token")
    assert client.get(reverse("admin:plugins_app_kventry_change", args=[theirs.pk])).status_code == 404


def test_auditors_only_look(login, entries):
    client = login("acme", "bob", "auditor")
    entry = KvEntry.objects.get(installation=entries[0], key="hits")
    assert client.get(reverse(CHANGELIST)).status_code == 200
    assert client.post(reverse("admin:plugins_app_kventry_delete", args=[entry.pk]), {"post": "yes"}).status_code == 403
    client.post(reverse(CHANGELIST), {"action": "clear_stores", "_selected_action": [entry.pk]})
    assert KvEntry.objects.filter(installation=entries[0]).count() == 2


def test_admins_delete_a_key_and_clear_a_store_in_the_change_log(login, entries):
    client = login("acme", "alice", "admin")
    hits = KvEntry.objects.get(installation=entries[0], key="hits")
    assert client.post(reverse("admin:plugins_app_kventry_delete", args=[hits.pk]), {"post": "yes"}).status_code == 302
    token = KvEntry.objects.get(installation=entries[0], key="token")
    client.post(reverse(CHANGELIST), {"action": "clear_stores", "_selected_action": [token.pk]})
    assert not KvEntry.objects.filter(installation=entries[0]).exists()
    assert KvEntry.objects.filter(installation=entries[1]).count() == 2
    assert list(AccountChange.objects.filter(account=entries[0].account).order_by("id")
                .values_list("action", flat=True))[-2:] == ["kv_delete", "kv_clear"]

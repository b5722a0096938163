"""AccountScopedAdmin details: API keys, autocompletes, related-field filters."""

import pytest
from django.urls import reverse

from accounts import services
from accounts.models import ApiKey

pytestmark = pytest.mark.django_db


def test_account_admin_sees_and_changes_only_own_keys(login, account, other_account):
    mine, _ = ApiKey.issue(account, name="mine")
    theirs, _ = ApiKey.issue(other_account, name="theirs")
    client = login(account.name, "alice", "admin")

    page = client.get(reverse("admin:accounts_apikey_changelist"))
    assert page.status_code == 200
    assert mine.prefix in page.content.decode()
    assert theirs.prefix not in page.content.decode()

    assert client.get(reverse("admin:accounts_apikey_change", args=[mine.pk])).status_code == 200
    assert client.get(reverse("admin:accounts_apikey_change", args=[theirs.pk])).status_code == 404
    assert client.post(reverse("admin:accounts_apikey_change", args=[theirs.pk]),
                       {"name": "stolen"}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.name == "theirs"


def test_add_form_offers_only_administered_accounts(login, account, other_account):
    client = login(account.name, "alice", "admin")
    found = client.get(reverse("admin:autocomplete"), {
        "app_label": "accounts", "model_name": "apikey", "field_name": "account", "term": ""}).json()
    assert [r["id"] for r in found["results"]] == [str(account.pk)]

    response = client.post(reverse("admin:accounts_apikey_add"), {"account": other_account.pk, "name": "x"})
    assert response.status_code == 200   # the form re-renders with an error
    assert not ApiKey.objects.filter(account=other_account).exists()


def test_auditor_does_not_see_api_keys(login, account):
    ApiKey.issue(account, name="mine")
    client = login(account.name, "audrey", "auditor")
    assert client.get(reverse("admin:accounts_apikey_changelist")).status_code == 403
    index = client.get(reverse("admin:index")).content.decode()
    assert "API keys" not in index


def test_autocomplete_offers_only_accounts_the_user_administers(login, account, other_account):
    services.add_member(other_account.name, "alice", "auditor")
    client = login(account.name, "alice", "admin")
    # Alice audits globex, but an autocomplete feeds an edit form: only accounts she administers.
    found = client.get(reverse("admin:autocomplete"), {
        "app_label": "accounts", "model_name": "membership", "field_name": "account", "term": ""}).json()
    assert [r["text"] for r in found["results"]] == ["acme"]


def test_account_filters_list_only_the_users_accounts(login, account, other_account):
    ApiKey.issue(account, name="mine")
    ApiKey.issue(other_account, name="theirs")
    client = login(account.name, "alice", "admin")
    page = client.get(reverse("admin:accounts_apikey_changelist")).content.decode()
    assert "globex" not in page

"""The Secrets admin page: admins set values that are never rendered back; auditors see names only."""

import pytest
from django.urls import reverse

from plugins_app.models import AccountChange, Installation, Secret
from plugins_app.services.secrets import store

pytestmark = pytest.mark.django_db

VALUE = "adm-4e8b1d9c0f2a7e63"
ADD = "/admin/plugins_app/secret/add/"


def form(account, **fields):
    return {"account": account.pk, "name": "TOKEN", "new_value": VALUE, "allowed_hosts": "api.example.com\n*.slack.com",
            "description": "", **fields}


def test_an_admin_sets_a_secret_that_is_never_rendered_back(login, account):
    client = login(account.name, "alice", "admin")
    added = client.post(ADD, form(account))
    assert added.status_code == 302, added.content.decode()[:2000]
    secret = Secret.objects.get()
    assert (secret.name, secret.allowed_hosts, secret.value()) == ("TOKEN", ["api.example.com", "*.slack.com"], VALUE)
    assert secret.set_by == "alice"
    assert AccountChange.objects.get().actor_name == "alice"
    page = client.get(f"/admin/plugins_app/secret/{secret.pk}/change/").content.decode()
    assert 'type="password"' in page and "set, updated" in page and VALUE not in page
    # Saving without a value keeps the stored one; a bad one is refused and never echoed in the form.
    kept = client.post(f"/admin/plugins_app/secret/{secret.pk}/change/",
                       {"new_value": "", "allowed_hosts": "api.example.com", "description": "x"})
    assert kept.status_code == 302
    assert Secret.objects.get().value() == VALUE and Secret.objects.get().allowed_hosts == ["api.example.com"]
    refused = client.post(ADD, form(account, name="OTHER", new_value="short", allowed_hosts="a.example.com"))
    assert refused.status_code == 200 and "at least 8 characters" in refused.content.decode()
    assert 'value="short"' not in refused.content.decode()


@pytest.mark.parametrize("fields, message", [
    ({"name": "lower"}, "is not a secret name"),
    ({"allowed_hosts": "https://a.example.com/"}, "no path"),
    ({"new_value": "x" * 9000}, "8 KiB"),
])
def test_bad_input_on_the_page_changes_nothing(login, account, fields, message):
    client = login(account.name, "alice", "admin")
    answer = client.post(ADD, form(account, **fields))
    assert answer.status_code == 200 and message in answer.content.decode()
    assert not Secret.objects.exists() and not AccountChange.objects.exists()


def test_an_auditor_sees_names_only_and_cannot_set(login, account):
    secret, _ = store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["api.example.com"])
    client = login(account.name, "audrey", "auditor")
    listing = client.get("/admin/plugins_app/secret/")
    assert listing.status_code == 200 and "TOKEN" in listing.content.decode()
    detail = client.get(f"/admin/plugins_app/secret/{secret.pk}/change/").content.decode()
    assert VALUE not in detail and 'type="password"' not in detail
    assert client.post(ADD, form(account, name="MINE")).status_code == 403
    assert client.post(f"/admin/plugins_app/secret/{secret.pk}/change/",
                       {"new_value": VALUE + "2", "allowed_hosts": "evil.example.com"}).status_code == 403
    assert client.post(f"/admin/plugins_app/secret/{secret.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Secret.objects.get().allowed_hosts == ["api.example.com"] and Secret.objects.count() == 1


def test_another_accounts_secret_answers_404(login, account, other_account):
    secret, _ = store.set_secret(other_account, "TOKEN", value=VALUE, allowed_hosts=["api.example.com"])
    client = login(account.name, "alice", "admin")
    assert client.get(f"/admin/plugins_app/secret/{secret.pk}/change/").status_code == 404
    assert "TOKEN" not in client.get("/admin/plugins_app/secret/").content.decode()


def test_deleting_on_the_page_goes_in_the_change_log(login, account):
    secret, _ = store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["api.example.com"])
    client = login(account.name, "alice", "admin")
    assert client.post(f"/admin/plugins_app/secret/{secret.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Secret.objects.exists()
    assert AccountChange.objects.filter(action="secret_delete", actor_name="alice").exists()


def test_the_install_page_offers_and_grants_a_secret_the_source_names(login, account):
    add = reverse("admin:plugins_app_installation_add")
    source = ("globalThis.middleware.systemPrompt = async (c) => { await host.fetch('https://api.example.com/', "
              "{headers: {Authorization: 'Bearer {{secret.TOKEN}}'}}); return c.systemPrompt; };")
    data = {"account": account.pk, "name": "Caller", "description": "", "language": "javascript", "source": source,
            "reviewed": ""}
    client = login(account.name, "alice", "admin")
    checked = client.post(add, {**data, "_check": "1"})
    assert 'name="grant" value="secret:TOKEN"' in checked.content.decode()
    installed = client.post(add, {**data, "reviewed": checked.context["form"].data["reviewed"],
                                  "grant": ["host:fetch", "secret:TOKEN"], "_install": "1"})
    assert installed.status_code == 302, installed.content.decode()[:3000]
    assert Installation.objects.get().granted_permissions == ["host:fetch", "secret:TOKEN"]


def test_the_form_says_an_entry_binds_scheme_and_port_and_keeps_them(login, account):
    client = login(account.name, "alice", "admin")
    page = client.get(ADD).content.decode()
    assert "a bare host is https on port 443 only" in page and "http://127.0.0.1:8080" in page
    added = client.post(ADD, form(account, allowed_hosts="api.example.com\nHTTP://127.0.0.1:8080\napi.example.com:8443"))
    assert added.status_code == 302
    assert Secret.objects.get().allowed_hosts == ["api.example.com", "http://127.0.0.1:8080",
                                                  "https://api.example.com:8443"]


def test_every_problem_shows_at_once_and_a_valid_value_is_kept(login, account):
    # Issue 44 item 7: one submit names every bad field; a bad host is named by its line; a lower-case
    # name says what a name is; the value typed stays when only other fields were refused.
    client = login(account.name, "alice", "admin")
    answer = client.post(ADD, form(account, name="token", allowed_hosts="api.example.com\n\nhttps://b.example.com/x"))
    assert answer.status_code == 200
    errors = answer.context["adminform"].form.errors
    assert set(errors) == {"name", "allowed_hosts"}
    assert "is not a secret name: an upper-case letter" in errors["name"][0]
    assert errors["allowed_hosts"][0].startswith("line 3: ") and "item" not in errors["allowed_hosts"][0]
    page = answer.content.decode()
    assert f'value="{VALUE}"' in page and "Enter a valid value" not in page
    both = client.post(ADD, form(account, name="token", new_value="short"))
    assert set(both.context["adminform"].form.errors) == {"name", "new_value"}
    assert 'value="short"' not in both.content.decode()
    assert not Secret.objects.exists()


def test_the_list_shows_who_is_granted_in_one_date_format_and_a_lone_account_is_chosen(login, account, install):
    secret, _ = store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["api.example.com"])
    granted = install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt; // {{secret.TOKEN}}",
                      grant=["secret:TOKEN"])
    install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;")
    client = login(account.name, "alice", "admin")
    listing = client.get("/admin/plugins_app/secret/").content.decode()
    row = listing[listing.index("TOKEN"):listing.index("</tr>", listing.index("TOKEN"))]
    assert f"/admin/plugins_app/installation/{granted.pk}/change/" in row and row.count("installation/") == 1
    stamp = f"{secret.updated_at:%Y-%m-%d %H:%M} UTC"
    assert row.count(stamp) == 2 and "p.m." not in row and "a.m." not in row
    add = client.get(ADD)
    assert add.context["adminform"].form.fields["account"].initial == account.pk

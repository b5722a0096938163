"""The admin home page: an account admin sees the account's 14 chains with links to reorder and try,
recent cancels and warnings, held and failing plugins, usage and the ways to install; an auditor
sees the same without a way to change anything; nobody sees another account's rows."""

import datetime

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone

from accounts.models import Account
from plugins_app.models import CancelLog, HandlerWarning, UsageDaily
from plugins_app.services.plugins import installations as plugins

from ..conftest import appender

pytestmark = pytest.mark.django_db


def page(client, **params):
    response = client.get("/admin/", params)
    assert response.status_code == 200
    return BeautifulSoup(response.content, "html.parser")


def chain_of(soup, hook):
    row = soup.select_one(f'tr.hub-chain-row[data-hook="{hook}"]')
    return [li.get_text(" ", strip=True) for li in row.select("ol.hub-chain li")]


@pytest.fixture
def busy_account(account, install):
    first = install(appender("-a"), name="First")
    second = install(appender("-b"), name="Second")
    plugins.set_enabled(account, second.pk, False)
    CancelLog.objects.create(account=account, hook="systemPrompt", installation=first, plugin=first.plugin,
                             plugin_slug="first", reason="no prompt for you", context={})
    for _ in range(3):
        HandlerWarning.objects.create(account=account, hook="systemPrompt", installation=first,
                                      plugin_slug="first", kind="timeout", message="ran past its budget")
    first.quarantined_until = timezone.now() + datetime.timedelta(minutes=5)
    first.save(update_fields=["quarantined_until"])
    UsageDaily.objects.create(account=account, plugin_slug="first", hook="systemPrompt",
                              day=timezone.localdate(), runs=42, total_ms=12.5)
    UsageDaily.objects.create(account=account, plugin_slug="first", hook="systemPrompt",
                              day=timezone.localdate() - datetime.timedelta(days=30), runs=1000, total_ms=1)
    return account, first, second


def test_an_account_admin_lands_on_the_accounts_home(login, busy_account):
    account, first, second = busy_account
    soup = page(login(account.name, "alice", "admin"))
    assert soup.h1.get_text(strip=True) == "acme"
    assert len(soup.select("tr.hub-chain-row")) == 14
    assert chain_of(soup, "systemPrompt") == ["First (quarantined)", "Second (off)"]
    row = soup.select_one('tr.hub-chain-row[data-hook="systemPrompt"]')
    links = {a.get_text(strip=True): a["href"] for a in row.select("a")}
    assert links["Reorder"] == f"/admin/plugins_app/chainentry/?account={account.pk}&hook=systemPrompt"
    assert links["Try"] == f"/admin/plugins_app/chainentry/try/?account={account.pk}&hook=systemPrompt"
    assert links["First"] == f"/admin/plugins_app/installation/{first.pk}/change/"
    empty = soup.select_one('tr.hub-chain-row[data-hook="todoAdded"]')
    assert "Reorder" not in empty.get_text() and "empty" in empty.get_text()

    attention = " ".join(soup.select_one(".hub-attention").get_text().split())
    assert "First: quarantined" in attention and "3 warnings in 24 h" in attention
    assert "no prompt for you" in soup.get_text()
    assert "ran past its budget" in soup.get_text()
    assert "42 handler runs" in soup.select_one(".hub-figures").get_text(" ", strip=True)   # not the old 1000
    install_links = [a["href"] for a in soup.select(".hub-actions a")]
    assert "/admin/plugins_app/installation/add/" in install_links
    assert "/admin/plugins_app/installation/catalog/" in install_links


def test_an_auditor_gets_the_audit_version(login, busy_account):
    account, first, _ = busy_account
    soup = page(login(account.name, "audrey", "auditor"))
    assert "You audit this account" in soup.get_text()
    assert not soup.select(".hub-actions")
    assert "Reorder" not in soup.get_text() and not soup.select(".hub-chains a")
    assert chain_of(soup, "systemPrompt") == ["First (quarantined)", "Second (off)"]
    assert soup.select_one(f'a[href="/admin/plugins_app/cancellog/?account__id__exact={account.pk}"]')
    assert "no prompt for you" in soup.get_text()


def test_another_accounts_rows_never_show(login, busy_account):
    other = Account.objects.create(name="globex")
    plugins.install_plugin(other, name="Globex secret", source=appender("-g"), language="javascript")
    CancelLog.objects.create(account=other, hook="systemPrompt", plugin_slug="globex-secret",
                             reason="globex private reason", context={})
    client = login("acme", "alice", "admin")
    soup = page(client, account=other.pk)   # asking for it gets the user's own account
    assert soup.h1.get_text(strip=True) == "acme"
    assert "Globex" not in soup.get_text() and "globex private reason" not in soup.get_text()
    assert not soup.select("#hub-account")   # one account: no chooser


def test_a_member_of_two_accounts_chooses(login, busy_account):
    client = login("acme", "alice", "admin")
    login("globex", "alice", "auditor")
    soup = page(client, account=Account.objects.get(name="globex").pk)
    assert soup.h1.get_text(strip=True) == "globex"
    assert [o.get_text() for o in soup.select("#hub-account option")] == ["acme", "globex"]
    assert "You audit this account" in soup.get_text()


def test_an_operator_without_memberships_gets_a_chooser_and_every_page(operator_client, busy_account):
    soup = page(operator_client)
    assert soup.select_one("details.hub-all-pages[open]")
    assert [o.get_text() for o in soup.select("#hub-account option")][1:] == ["acme"]
    soup = page(operator_client, account=busy_account[0].pk)
    assert chain_of(soup, "systemPrompt") == ["First (quarantined)", "Second (off)"]

"""The admin shows quarantine and the slow lane on installations and releases them, per account."""

import pytest
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.db import SessionStore
from django.test import RequestFactory
from django.urls import reverse

from accounts import services
from plugins_app.models import ChainEntry, Installation
from plugins_app.services.execution import quarantine

from .test_quarantine import make_installation, reload, strike, version

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:plugins_app_installation_changelist")


def change_url(installation):
    return reverse("admin:plugins_app_installation_change", args=[installation.pk])


def release_url(installation):
    return reverse("admin:plugins_app_installation_release", args=[installation.pk])


def release_action(client, *installations):
    return client.post(CHANGELIST, {"action": "release_selected",
                                    ACTION_CHECKBOX_NAME: [i.pk for i in installations]}, follow=True)


@pytest.fixture
def quarantined(account):
    installation = make_installation(account)
    strike(installation, 3)
    return reload(installation)


@pytest.fixture
def mallory(login, account, other_account):
    """Audits acme (where the quarantined installation lives) and administers globex."""
    services.add_member(account.name, "mallory", "auditor")
    return login(other_account.name, "mallory", "admin")


def test_the_list_shows_the_status_and_filters_by_it(login, account, quarantined):
    slow = make_installation(account, "Hog")
    quarantine.mark_slow_lane(account.pk, slow.pk, "1 s of CPU per call")
    calm = make_installation(account, "Calm")
    client = login(account.name, "alice", "admin")

    page = client.get(CHANGELIST).content.decode()
    assert "Quarantined" in page and "Slow lane" in page

    only_quarantined = client.get(CHANGELIST, {"quarantine": "quarantined"})
    assert [i.pk for i in only_quarantined.context["cl"].result_list] == [quarantined.pk]
    in_slow_lane = client.get(CHANGELIST, {"quarantine": "slow_lane"})
    assert sorted(i.pk for i in in_slow_lane.context["cl"].result_list) == sorted([quarantined.pk, slow.pk])
    assert calm.pk not in [i.pk for i in in_slow_lane.context["cl"].result_list]


def test_the_change_page_shows_the_status_and_a_release_button(login, account, quarantined):
    client = login(account.name, "alice", "admin")
    page = client.get(change_url(quarantined)).content.decode()
    assert "Quarantined" in page and "3 timeouts/wedges" in page
    assert f'action="{release_url(quarantined)}"' in page and "Release now" in page


def test_no_release_button_when_nothing_holds_the_installation(login, account):
    calm = make_installation(account, "Calm")
    client = login(account.name, "alice", "admin")
    page = client.get(change_url(calm)).content.decode()
    assert "Not quarantined" in page and "Release now" not in page


def test_the_account_admin_releases_from_the_change_page(login, account, quarantined):
    client = login(account.name, "alice", "admin")
    before = version(account)
    assert client.get(release_url(quarantined)).status_code == 405

    response = client.post(release_url(quarantined))

    assert response.status_code == 302 and response["Location"] == change_url(quarantined)
    assert not quarantine.is_quarantined(reload(quarantined)) and quarantined.slow_lane_until is None
    assert version(account) == before + 1


def test_the_account_admin_releases_with_the_action(login, account, quarantined):
    client = login(account.name, "alice", "admin")
    response = release_action(client, quarantined)
    assert "Released 1 installation(s)." in response.content.decode()
    assert reload(quarantined).quarantined_until is None


def test_an_operator_releases_any_account(operator_client, quarantined):
    assert operator_client.post(release_url(quarantined)).status_code == 302
    assert reload(quarantined).quarantined_until is None


def test_an_auditor_of_the_account_who_administers_another_releases_nothing(mallory, account, quarantined):
    before = version(account)

    assert mallory.post(release_url(quarantined)).status_code in (403, 404)
    release_action(mallory, quarantined)

    assert quarantine.is_quarantined(reload(quarantined))
    assert quarantined.quarantine_reason and quarantined.slow_lane_until is not None
    assert version(account) == before


def test_the_action_checks_each_selected_installation(account, other_account, quarantined):
    """Even a selection that reached the action unscoped releases only what the user administers."""
    services.add_member(account.name, "mallory", "auditor")
    user, _ = services.add_member(other_account.name, "mallory", "admin")
    theirs = make_installation(other_account, "Theirs")
    strike(theirs, 3)
    request = RequestFactory().post(CHANGELIST)
    request.user, request.session = user, SessionStore()
    request._messages = FallbackStorage(request)
    model_admin = admin.site._registry[Installation]

    model_admin.release_selected(request, Installation.objects.filter(pk__in=[quarantined.pk, theirs.pk]))

    assert quarantine.is_quarantined(reload(quarantined))
    assert not quarantine.is_quarantined(reload(theirs))
    texts = [str(m) for m in get_messages(request)]
    assert any("Refused 1 installation(s)" in t for t in texts)
    assert "Released 1 installation(s)." in texts


def test_a_quarantined_plugin_is_called_quarantined_wherever_its_chain_shows(login, account, quarantined):
    # Issue 33: the chain page said "enabled", the home page did not flag it, and the installation's page
    # said "0 strikes" under the reason "3 timeouts".
    client = login(account.name, "alice", "admin")
    entry = ChainEntry.objects.create(account=account, hook="systemPrompt", installation=quarantined, position=0)
    chain = client.get(reverse("admin:plugins_app_chainentry_changelist"), {"account": account.pk, "hook": entry.hook})
    row = chain.content.decode().split('class="hub-plugin-name"')[1].split("</tr>")[0]
    assert "quarantined until" in row and ">enabled<" not in row
    home = client.get(reverse("admin:index")).content.decode()
    chain_row = home.split(f'data-hook="{entry.hook}"')[1].split("</tr>")[0]
    assert "(quarantined)" in chain_row and "hub-quarantined" in chain_row
    status = client.get(change_url(quarantined)).content.decode().split("Not quarantined")[0]
    assert "0 strikes" not in status and "were cleared when the quarantine began" in status


def test_strikes_are_counted_against_the_number_that_quarantines(login, account):
    installation = make_installation(account)
    strike(installation, 1)
    page = login(account.name, "alice", "admin").get(change_url(installation)).content.decode()
    assert "1 of 3 strikes" in page and "within 10 minutes; at 3 it is quarantined" in page

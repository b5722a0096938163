"""The versions page checks a draft against recorded calls and shows it above its Deploy button; recorded
calls are listed for auditors; another account's are 404."""

import pytest
from django.urls import reverse

from plugins_app.models import RecordedCall

from .test_check_api import guard, record  # noqa: F401 - `guard` is this module's fixture too

pytestmark = pytest.mark.django_db


def page_url(installation, **query):
    url = reverse("admin:plugins_app_pluginversion_installation", args=[installation.pk])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def test_an_admin_checks_a_draft_before_deploying_it(login, account, guard):  # noqa: F811
    record(account, ["hi"] * 7 + ["xyz"] * 2 + ["my secret"])
    client = login("acme", "alice", "admin")
    before = client.get(page_url(guard)).content.decode()
    assert "Check against 200 recorded calls" in before and "hub-check-summary" not in before
    html = client.get(page_url(guard, check=2)).content.decode()
    summary = "10 recorded calls: 7 same, 2 different, 1 would now cancel"
    assert summary in html and "see them" in html
    assert html.index(summary) < html.index("Deploy version 2")   # shown before the Deploy button
    assert 'data-kind="wouldCancel"' in html and "no secrets" in html and "XYZ" in html


def test_an_auditor_lists_recorded_calls_and_cannot_check_or_see_another_accounts(login, account, other_account,
                                                                                  guard):  # noqa: F811
    record(account, ["hi"])
    record(other_account, ["theirs"])
    auditor = login("acme", "audrey", "auditor")
    listing = auditor.get(reverse("admin:plugins_app_recordedcall_changelist")).content.decode()
    assert "userMessageInbound" in listing and "1 recorded call" in listing
    theirs = RecordedCall.objects.get(account=other_account)
    assert auditor.get(reverse("admin:plugins_app_recordedcall_change", args=[theirs.pk])).status_code == 404
    mine = RecordedCall.objects.get(account=account)
    detail = auditor.get(reverse("admin:plugins_app_recordedcall_change", args=[mine.pk])).content.decode()
    assert "&quot;hi&quot;" in detail
    assert "hub-check-summary" not in auditor.get(page_url(guard, check=2)).content.decode()   # not a deployer

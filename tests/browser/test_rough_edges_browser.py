"""In a real browser, the admin's small lies of issue 33: primary buttons that looked disabled, a hidden
error box that showed empty, a quarantined plugin shown as running, and the date filters' presets."""

import pytest

from accounts import services
from accounts.models import Account
from plugins_app.models import CancelLog, Installation
from plugins_app.services.execution import quarantine
from plugins_app.services.plugins import catalog
from plugins_app.services.plugins import installations as plugins

from .conftest import PASSWORD, log_in
from .test_versions_browser import _contrast

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROMPT_SOURCE = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' Be brief.';"


@pytest.fixture
def acme():
    account = Account.objects.create(name="acme")
    services.add_member("acme", "alice", "admin", password=PASSWORD)
    catalog.sync_catalog()
    return account


def _colours(locator) -> tuple[str, str]:
    return tuple(locator.evaluate("e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]"))


def test_primary_buttons_read_as_buttons_and_a_quarantined_plugin_is_flagged(page, live_server, acme):
    brief = plugins.install_plugin(acme, name="Brief", language="javascript", source=PROMPT_SOURCE)
    for _ in range(3):
        quarantine.record_misbehaviour(acme.pk, brief.pk, "timeout", "ran past 5 s")
    assert Installation.objects.get(pk=brief.pk).quarantined_until is not None
    log_in(page, live_server, "alice")
    install = page.get_by_role("link", name="Install a custom plugin")
    assert _contrast(*_colours(install)) >= 4.5, _colours(install)
    entry = page.locator('tr.hub-chain-row[data-hook="systemPrompt"] ol.hub-chain li')
    assert entry.inner_text() == "Brief (quarantined)"
    flag = entry.locator(".hub-flag-quarantined")
    assert flag.is_visible()

    page.goto(f"{live_server.url}/admin/plugins_app/chainentry/?account={acme.pk}&hook=systemPrompt")
    assert "quarantined until" in page.locator("#result_list tbody tr").inner_text()

    page.goto(f"{live_server.url}/admin/plugins_app/installation/catalog/")
    details = page.locator('li.hub-card[data-slug="maintenance-window"]').get_by_role("link", name="Details and install")
    assert _contrast(*_colours(details)) >= 4.5, _colours(details)


def test_edit_as_json_shows_no_empty_error_box(page, live_server, acme):
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/installation/catalog/maintenance-window/")
    problem = page.locator(".hub-json-problem")
    assert problem.count() == 1 and not problem.is_visible()
    page.click("button.hub-json-toggle")
    assert page.locator("#id_settings_json").is_visible() and not problem.is_visible()
    page.fill("#id_settings_json", "[1, 2")
    page.click("button.hub-json-toggle")
    assert problem.is_visible() and "not a JSON object" in problem.inner_text()
    page.fill("#id_settings_json", "{}")
    page.click("button.hub-json-toggle")
    assert not problem.is_visible() and not page.locator("#id_settings_json").is_visible()


def test_a_date_preset_filters_the_cancel_log(page, live_server, acme):
    services.add_member("acme", "audrey", "auditor", password=PASSWORD)
    CancelLog.objects.create(account=acme, hook="todoAdded", plugin_slug="limit", reason="today's", context={})
    log_in(page, live_server, "audrey")
    page.goto(f"{live_server.url}/admin/plugins_app/cancellog/")
    since = page.locator('input[type=text][name="created_at__since"]')
    assert since.get_attribute("placeholder") == "YYYY-MM-DD" and since.input_value() == ""
    page.get_by_role("link", name="Past 7 days").click()
    page.wait_for_url("**created_at__since=*")
    assert since.input_value() != "" and "today's" in page.locator("#result_list").inner_text()
    assert page.locator(".paginator").inner_text().strip().startswith("1 cancel-log entry")


FETCHING_VETO = ("globalThis.middleware.userMessageInbound = async (c, t) => "
                 "t.cancel('status ' + (await host.fetch('http://127.0.0.1:9/x')).status);")


def test_an_auditors_replay_page_shows_stood_in_calls_and_no_live_reads(page, live_server, acme):
    services.add_member("acme", "audrey", "auditor", password=PASSWORD)
    veto = plugins.install_plugin(acme, name="Looker", language="javascript", source=FETCHING_VETO,
                                  grant=["host:fetch"])
    entry = CancelLog.objects.create(account=acme, hook="userMessageInbound", installation=veto, plugin_slug="looker",
                                     reason="status 200", context={"sessionId": "1", "channelId": None,
                                                                   "text": "hi", "mediaIds": []})
    log_in(page, live_server, "audrey")
    page.goto(f"{live_server.url}/admin/plugins_app/cancellog/{entry.pk}/replay/")
    assert page.locator('input[name="live_reads"]').count() == 0
    assert page.locator('select[name="draft"]').input_value() == ""
    page.click("#hub-replay-form button[type=submit]")
    page.locator("#hub-would-call").wait_for()
    assert "host.fetch" in page.locator("#hub-would-call").inner_text()
    assert "stood in" in page.locator("#hub-would-call").inner_text()
    assert page.locator("#hub-replayed-reason").inner_text() == "status 0"
    assert page.locator('select[name="draft"]').input_value() == ""   # still "the current chain"

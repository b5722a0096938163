"""In a real browser: the home page, a schema-driven settings form (invalid then valid, and its JSON
view), installing from the catalog with required settings, and try-it for a cancelled run."""

import json

import pytest

from accounts import services
from accounts.models import Account
from plugins_app.models import CancelLog, Installation
from plugins_app.services.plugins import catalog
from plugins_app.services.plugins import installations as plugins

from .conftest import PASSWORD, log_in, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROMPT_SOURCE = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' Be brief.';"
TODO_GUARD = ("globalThis.middleware.todoAdded = async (c, tools) => "
              "c.texts.length > 1 ? tools.cancel('one todo at a time') : c.texts;")


@pytest.fixture
def acme():
    account = Account.objects.create(name="acme")
    services.add_member("acme", "alice", "admin", password=PASSWORD)
    services.add_member("acme", "audrey", "auditor", password=PASSWORD)
    catalog.sync_catalog()
    return account


def test_the_home_page_shows_the_accounts_chains(page, live_server, tmp_path, acme):
    brief = plugins.install_plugin(acme, name="Brief", language="javascript", source=PROMPT_SOURCE)
    catalog.install_official(acme, "caveman")
    CancelLog.objects.create(account=acme, hook="todoAdded", plugin_slug="todo-guard", reason="one todo at a time",
                             context={"texts": ["a", "b"]})
    log_in(page, live_server, "alice")
    row = page.locator('tr.hub-chain-row[data-hook="systemPrompt"]')
    assert row.locator("ol.hub-chain li").all_inner_texts() == ["Brief", "Caveman"]
    assert page.locator("tr.hub-chain-row").count() == 14
    assert "one todo at a time" in page.locator("#hub-cancels-title + ul").inner_text()
    shoot(page, tmp_path, "home")
    row.get_by_role("link", name="Brief").click()
    page.wait_for_url(f"**/installation/{brief.pk}/change/")
    page.go_back()
    row.get_by_role("link", name="Try").click()
    page.wait_for_url("**/chainentry/try/?account=*&hook=systemPrompt")

    page.context.clear_cookies()
    log_in(page, live_server, "audrey")
    assert "You audit this account" in page.locator("#content-main").inner_text()
    assert page.locator(".hub-actions").count() == 0
    shoot(page, tmp_path, "home-auditor")


def test_catalog_install_with_required_settings(page, live_server, tmp_path, acme):
    log_in(page, live_server, "alice")
    page.click("text=Install from the catalog")
    page.wait_for_url("**/installation/catalog/")
    shoot(page, tmp_path, "catalog")
    card = page.locator('li.hub-card[data-slug="maintenance-window"]')
    card.get_by_role("link", name="Details and install").click()
    page.wait_for_url("**/catalog/maintenance-window/")
    # Required settings are flagged; defaults are filled in.
    assert page.locator('label[for="id_setting_start"] .hub-required').count() == 1
    assert page.locator("#id_setting_timeZone").input_value() == "UTC"
    assert page.locator('input[name="setting_kinds"][value="heartbeat"]').is_checked()

    # Invalid: submitted without start and end. The error is at the top of the page and at each field.
    page.click("input[type=submit]")
    note = page.locator("#content-main > .errornote")
    note.wait_for()
    assert note.is_visible() and note.bounding_box()["y"] < 400
    assert "This field is required" in page.locator(".field-setting_start .errorlist").inner_text()
    assert not Installation.objects.exists()
    shoot(page, tmp_path, "catalog-install-errors")

    # The JSON view shows the same settings, and a change made there comes back to the form.
    page.fill("#id_setting_start", "22:00")
    page.click("button.hub-json-toggle")
    settings = json.loads(page.locator("#id_settings_json").input_value())
    assert settings["start"] == "22:00" and settings["kinds"] == ["cron_job", "heartbeat"]
    page.fill("#id_settings_json", json.dumps({**settings, "end": "06:30", "timeZone": "Europe/Berlin"}))
    page.click("button.hub-json-toggle")
    assert page.locator("#id_setting_end").input_value() == "06:30"
    assert page.locator("#id_setting_timeZone").input_value() == "Europe/Berlin"

    page.click("input[type=submit]")
    page.wait_for_selector(".messagelist .success")
    installation = Installation.objects.get()
    assert (installation.settings["start"], installation.settings["end"], installation.settings["timeZone"]) == (
        "22:00", "06:30", "Europe/Berlin")
    # The installation's page edits the settings with the same form; the JSON view waits behind its button.
    assert page.locator("#id_setting_end").input_value() == "06:30"
    assert not page.locator("#id_settings_json").is_visible()
    assert page.locator("button.hub-json-toggle").inner_text() == "Edit as JSON"
    shoot(page, tmp_path, "installation")
    page.goto(f"{live_server.url}/admin/plugins_app/installation/catalog/")
    assert card.locator(".hub-badge").inner_text() == "Installed"


def test_try_it_for_a_cancelled_run(page, live_server, tmp_path, acme):
    plugins.install_plugin(acme, name="Todo guard", language="javascript", source=TODO_GUARD)
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/chainentry/try/?account={acme.pk}&hook=todoAdded")
    # A field per context field, filled with a realistic sample.
    assert page.locator("#id_ctx_texts").input_value() == "Check the backup logs\nDraft the incident summary"
    page.click("input[type=submit]")
    page.wait_for_selector("#tryit-result")
    result = page.locator("#tryit-result")
    assert "cancelled" in result.locator("h2").inner_text()
    assert "Cancelled by Todo guard" in result.inner_text() and "one todo at a time" in result.inner_text()
    assert page.locator("#tryit-after").count() == 0
    assert result.locator(".hub-steps a").all_inner_texts() == ["Todo guard"]
    shoot(page, tmp_path, "try-it")

    # Choosing another hook loads its own fields.
    page.select_option("#id_hook", "sshCommandSending")
    page.wait_for_url("**hook=sshCommandSending**")
    assert page.locator("#id_ctx_command").input_value() == "df -h /var"

"""In a real browser, the admin's rough edges of issue 44 (items 6-12): the grant on the install page, the
Secrets form, the account's pages from home and Live's filter, the versions page's questions and replay
links, settings labels, reordering by keyboard, and the cancel log's columns and links."""

from dataclasses import replace

import pytest

from accounts import services
from accounts.models import Account, ApiKey
from plugins_app.models import CancelLog, ChainEntry, Installation, Secret
from plugins_app.services.observability import tail
from plugins_app.services.plugins import catalog
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.versions import releases as versions

from .conftest import PASSWORD, execute, log_in, shoot
from .test_admin_browser import chain_rows, type_source

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROMPT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "base"}
FETCHER = ("globalThis.middleware.systemPrompt = async (c) => {\n"
           "  await host.fetch('https://example.com/');\n  return c.systemPrompt;\n};\n")
GATE = "globalThis.middleware.userMessageInbound = async (c, tools) => tools.cancel('held: ' + c.text);\n"
INBOUND = {"sessionId": "1", "channelId": None, "text": "hello", "mediaIds": []}
VALUE = "a-secret-value-1234"


def appender(suffix):
    return f"globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + {suffix!r};"


@pytest.fixture(autouse=True)
def patient(page):
    """Checking a source compiles it in the engine: on a busy machine that outlasts the usual 15 s."""
    page.set_default_timeout(60_000)


@pytest.fixture
def acme():
    account = Account.objects.create(name="acme")
    services.add_member("acme", "alice", "admin", password=PASSWORD)
    return account


@pytest.fixture
def tailed(settings, tmp_path):
    settings.HUB_TAIL = replace(settings.HUB_TAIL, channel="file", directory=str(tmp_path / "tail"))
    tail.reset_channel()
    yield
    tail.reset_channel()


def test_the_install_review_offers_the_grant_and_says_what_fails_without_it(page, live_server, tmp_path, acme):
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/installation/add/")
    page.fill("#id_name", "Fetcher")
    page.select_option("#id_language", "javascript")
    type_source(page, FETCHER)
    page.click("input[name=_check]")
    grant = page.get_by_label("host:fetch: for host.fetch")
    grant.wait_for()
    assert grant.is_checked()   # offered, ticked: installing is the consent
    assert "Permissions it needs" in page.locator(".hub-review").inner_text()
    assert "fails" in page.locator(".hub-review .field-grant .help").inner_text()
    shoot(page, tmp_path, "install-review")
    grant.uncheck()
    page.click("input[name=_install]")
    warning = page.locator(".messagelist .warning")
    warning.wait_for()
    assert "not granted host:fetch (host.fetch)" in warning.inner_text()
    assert "fail until you grant" in warning.inner_text() and "now runs" not in warning.inner_text()
    assert Installation.objects.get().granted_permissions == []


def test_the_secrets_form_shows_every_problem_at_once_and_keeps_the_value(page, live_server, tmp_path, acme):
    granted = plugins.install_plugin(acme, name="Notifier", language="javascript", grant=["secret:SLACK_TOKEN"],
                                     source="globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;"
                                            " // {{secret.SLACK_TOKEN}}")
    log_in(page, live_server, "alice")
    page.get_by_role("navigation", name="The account's pages").get_by_role("link", name="Secrets").click()
    page.wait_for_url("**/secret/?*")
    page.get_by_role("link", name="Add secret").click()
    assert page.locator("#id_account option:checked").inner_text() == "acme"   # the one account, chosen
    page.fill("#id_name", "slack_token")
    page.fill("#id_new_value", VALUE)
    page.fill("#id_allowed_hosts", "hooks.slack.com\nhttps://hooks.slack.com/services")
    page.click("input[name=_save]")
    page.locator(".errornote").wait_for()
    assert "is not a secret name: an upper-case letter" in page.locator(".field-name .errorlist").inner_text()
    hosts_error = page.locator(".field-allowed_hosts .errorlist").inner_text()
    assert hosts_error.startswith("line 2: ") and "item" not in hosts_error
    assert page.locator("#id_new_value").input_value() == VALUE   # not typed again
    page.fill("#id_name", "SLACK_TOKEN")
    page.fill("#id_allowed_hosts", "hooks.slack.com")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")
    secret = Secret.objects.get()
    assert secret.value() == VALUE
    row = page.locator("#result_list tbody tr").first
    assert row.locator(".field-granted").inner_text() == "Notifier"
    assert row.locator(".field-granted a").get_attribute("href").endswith(f"/installation/{granted.pk}/change/")
    stamp = f"{secret.updated_at:%Y-%m-%d %H:%M} UTC"
    assert row.locator(".field-state").inner_text() == f"set, updated {stamp}"
    assert row.locator(".field-updated").inner_text() == stamp
    shoot(page, tmp_path, "secrets")


def test_home_links_the_pages_and_live_takes_a_plugins_name(page, live_server, tmp_path, acme, tailed):
    plugins.install_plugin(acme, name="Gate Keeper", language="javascript", source=GATE)
    _, key = ApiKey.issue(acme, name="browser")
    log_in(page, live_server, "alice")
    nav = page.get_by_role("navigation", name="The account's pages")
    assert nav.get_by_role("link").all_inner_texts() == ["Cancel log", "Live", "Change log", "Versions", "Secrets",
                                                        "Usage"]
    nav.get_by_role("link", name="Live").click()
    page.wait_for_url("**/cancellog/live/?account=*")
    empty = page.locator("#hub-live tr.hub-live-empty")
    assert "press Watch" in empty.inner_text()
    # A name that is no plugin's is said, not watched in silence.
    page.fill('input[name="plugin"]', "Gatekeeper")
    page.click("#hub-live-form button[type=submit]")
    problem = page.locator("#hub-live-problem")
    assert problem.is_visible() and "No plugin installed in acme is called “Gatekeeper”" in problem.inner_text()
    assert page.locator("#hub-live-state").inner_text() == "stopped"
    # The display name, as the admin shows it, is taken for its slug.
    page.fill('input[name="plugin"]', "gate keeper")
    page.click("#hub-live-form button[type=submit]")
    page.wait_for_function("document.getElementById('hub-live-state').textContent === 'live'")
    assert not problem.is_visible() and "nothing has happened yet" in empty.inner_text()
    status, answer = execute(live_server, key, "userMessageInbound", INBOUND)
    assert status == 200 and answer["outcome"] == "cancelled"
    page.wait_for_selector("tr.hub-live-cancel")
    assert page.locator("tr.hub-live-cancel td").all_inner_texts()[3] == "gate-keeper"
    assert empty.count() == 0
    for name, path in [("Change log", "/accountchange/"), ("Versions", "/pluginversion/")]:
        page.goto(f"{live_server.url}/admin/")
        nav.get_by_role("link", name=name).click()
        page.wait_for_url(f"**{path}*")


def test_a_draft_links_to_recorded_cancels_and_replay_names_both_versions(page, live_server, tmp_path, acme):
    guard = plugins.install_plugin(acme, name="Guard", language="javascript", source=GATE)
    versions.create_draft(acme, guard.pk, language="javascript",
                          source=GATE.replace("tools.cancel('held: ' + c.text)", "c.text"))
    entry = CancelLog.objects.create(account=acme, hook="userMessageInbound", plugin_slug="guard", installation=guard,
                                     plugin_version=1, reason="held: hello", context=INBOUND)
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/pluginversion/installation/{guard.pk}/")
    assert page.locator("#version-2 .hub-try-draft").inner_text() == "Try this draft"
    assert page.locator("#hub-rollback").count() == 0   # version 1 is the only one that was ever live
    replay_on = page.locator("#version-2 .hub-replay-on")
    replay_on.locator("summary").click()
    replay_on.get_by_role("link").first.click()
    page.wait_for_url(f"**/cancellog/{entry.pk}/replay/?draft={guard.pk}:2")
    assert page.locator('select[name="draft"] option:checked').inner_text() == "Guard version 2"
    page.click("#hub-replay-form button[type=submit]")
    page.wait_for_selector("#hub-replayed-against:has-text('version 2')")
    assert page.locator("#hub-replayed-outcome").inner_text() == "unchanged"
    assert "guard (version 1)" in page.locator("#hub-replay tbody").inner_text()
    # Against the current chain, the replayed side names the version that ran it.
    page.select_option('select[name="draft"]', "")
    page.click("#hub-replay-form button[type=submit]")
    page.wait_for_selector("#hub-replayed-against:has-text('the current chain')")
    assert page.locator("#hub-replayed-by").inner_text() == "guard (version 1)"


def test_the_line_diff_gives_the_code_the_width(page, live_server, acme):
    installation = plugins.install_plugin(acme, name="Greeter", language="javascript", source=appender("-v1"))
    versions.create_draft(acme, installation.pk, source=appender("-v2"), language="javascript")
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/pluginversion/installation/{installation.pk}/")
    cells = page.locator("#hub-line-diff tbody tr").first.locator("td")
    widths = [cells.nth(i).bounding_box()["width"] for i in range(4)]
    assert widths[1] > 400 and widths[3] > 400, widths     # each side's code about half the page
    assert widths[0] < 80 and widths[2] < 80, widths       # the line numbers as narrow as they are


def test_settings_read_the_same_and_examples_look_like_examples(page, live_server, tmp_path, acme):
    catalog.sync_catalog()
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/installation/catalog/maintenance-window/")
    start = page.locator("#id_setting_start")
    assert start.get_attribute("placeholder") == "e.g. 22:00"
    style = start.evaluate("e => getComputedStyle(e, '::placeholder').fontStyle")
    assert style == "italic"
    assert page.locator('label[for="id_setting_timeZone"]').inner_text().strip() == "timeZone"
    page.fill("#id_setting_start", "22:00")
    page.fill("#id_setting_end", "24:30")
    page.click("input[type=submit]")
    error = page.locator(".field-setting_end .errorlist")
    error.wait_for()
    assert error.inner_text().startswith("expected a 24-hour time") and "settings.end" not in error.inner_text()


def test_a_chain_is_reordered_from_the_keyboard(page, live_server, tmp_path, acme):
    _, key = ApiKey.issue(acme, name="platform")
    for name in ("First", "Second", "Third"):
        plugins.install_plugin(acme, name=name, language="javascript", source=appender(f"-{name.lower()}"))
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/chainentry/?account={acme.pk}&hook=systemPrompt")
    assert chain_rows(page) == ["First", "Second", "Third"]
    assert page.get_by_role("button", name="Move First up").is_disabled()
    # A button with an accessible name, as a screen reader would find it.
    with page.expect_response(lambda r: "adminsortable2_update" in r.url) as update:
        page.get_by_role("button", name="Move First down").click()
    assert update.value.status == 200
    page.wait_for_selector("#hub-chain-status .success")
    assert "1. Second, 2. First, 3. Third" in page.locator("#hub-chain-status").inner_text()
    assert page.locator("#result_list tbody td.field-place").all_inner_texts() == ["1", "2", "3"]
    # The handle is reached with Tab and moved with the arrow keys; focus stays on it.
    handle = page.get_by_role("button", name="Reorder Third, place 3 of 3: drag, or press the up and down arrow keys")
    handle.focus()
    with page.expect_response(lambda r: "adminsortable2_update" in r.url):
        page.keyboard.press("ArrowUp")
    page.wait_for_function("document.querySelector('#hub-chain-status').textContent.includes('2. Third')")
    assert chain_rows(page) == ["Second", "Third", "First"]
    assert page.evaluate("document.activeElement.getAttribute('aria-label')").startswith("Reorder Third, place 2 of 3")
    shoot(page, tmp_path, "chain-keyboard")
    order = list(ChainEntry.objects.filter(account=acme, hook="systemPrompt").order_by("position")
                 .values_list("installation__plugin__name", flat=True))
    assert order == ["Second", "Third", "First"]
    assert execute(live_server, key, "systemPrompt", PROMPT)[1]["value"] == "base-second-third-first"


def test_the_cancel_log_gives_the_reason_room_and_links_the_entry(page, live_server, tmp_path, acme):
    guard = plugins.install_plugin(acme, name="Guard", language="javascript", source=GATE)
    services.add_member("acme", "audrey", "auditor", password=PASSWORD)
    entry = CancelLog.objects.create(account=acme, hook="userMessageInbound", plugin_slug="guard", installation=guard,
                                     plugin_version=1, turn_id="turn-42", context=INBOUND,
                                     reason="held: the message asked for a refund above the limit set for this agent")
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/cancellog/")
    row = page.locator("#result_list tbody tr").first
    assert row.locator(".field-version").inner_text() == "1" and row.locator(".field-turn").inner_text() == "turn-42"
    widths = {cell.get_attribute("class"): cell.bounding_box()["width"] for cell in row.locator("td, th").all()}
    reason = widths.pop("field-short_reason")
    assert reason > max(widths.values()), (reason, widths)   # the widest column
    # Hook takes no more than its name needs (it had the room the reason lacked).
    hook = row.locator(".field-hook")
    needed = hook.evaluate("e => { const r = document.createRange(); r.selectNodeContents(e); const s = getComputedStyle(e);"
                           " return r.getBoundingClientRect().width + parseFloat(s.paddingLeft) + parseFloat(s.paddingRight); }")
    assert hook.bounding_box()["width"] <= 1.05 * needed
    shoot(page, tmp_path, "cancel-log")
    page.goto(f"{live_server.url}/admin/plugins_app/cancellog/{entry.pk}/change/")
    page.get_by_role("link", name="Guard in acme").click()
    page.wait_for_url(f"**/installation/{guard.pk}/change/")
    page.go_back()
    page.get_by_role("link", name="version 1").click()
    page.wait_for_url(f"**/pluginversion/installation/{guard.pk}/#version-1")
    page.go_back()
    page.get_by_role("link", name="guard", exact=True).click()
    page.wait_for_url("**/cancellog/?plugin_slug__exact=guard")
    # An auditor cannot open the installation's page: the link goes to its versions, which they read.
    page.context.clear_cookies()
    log_in(page, live_server, "audrey")
    page.goto(f"{live_server.url}/admin/plugins_app/cancellog/{entry.pk}/change/")
    page.get_by_role("link", name="Guard in acme: its versions").click()
    page.wait_for_url(f"**/pluginversion/installation/{guard.pk}/")

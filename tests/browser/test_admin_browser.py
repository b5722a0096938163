"""In a real browser: an account admin installs two plugins and drags the second above the first,
and the execute API runs them in the new order; an auditor finds no way to change the cancel log."""

import pytest

from accounts import services
from accounts.models import Account, ApiKey
from plugins_app.models import CancelLog
from plugins_app.services.plugins import installations as plugins

from .conftest import PASSWORD, allow_console_error, execute, log_in, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROMPT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "base"}


def appender(suffix):
    return f"globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + {suffix!r};"


def install_through_the_form(page, live_server, name, source):
    page.goto(f"{live_server.url}/admin/plugins_app/installation/add/")
    page.fill("#id_name", name)
    page.select_option("#id_language", "javascript")
    type_source(page, source)
    page.click("input[name=_check]")
    page.locator(".hub-review").wait_for()   # count() does not wait for the checked page
    assert page.locator(".hub-review").get_by_text("systemPrompt").count() == 1
    page.click("input[name=_install]")
    page.wait_for_selector(".messagelist .success")


def type_source(page, source):
    """The source goes into the code editor (the textarea behind it follows)."""
    page.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(source)


def chain_rows(page):
    return [name.strip() for name in page.locator("#result_list tbody td.field-plugin_name").all_inner_texts()]


def drag(page, source, target):
    """Drag a row's handle onto another row's place with real mouse moves, as a person would."""
    start, end = source.bounding_box(), target.bounding_box()
    x = start["x"] + start["width"] / 2
    page.mouse.move(x, start["y"] + start["height"] / 2)
    page.mouse.down()
    for step in range(1, 11):
        page.mouse.move(x, start["y"] + start["height"] / 2 + (end["y"] - start["y"] - 4) * step / 10)
        page.wait_for_timeout(30)
    page.mouse.up()


def test_an_account_admin_installs_two_plugins_and_reorders_them(page, live_server, tmp_path):
    account = Account.objects.create(name="acme")
    services.add_member("acme", "alice", "admin", password=PASSWORD)
    _, raw_key = ApiKey.issue(account, name="platform")
    log_in(page, live_server, "alice")

    install_through_the_form(page, live_server, "First", appender("-first"))
    install_through_the_form(page, live_server, "Second", appender("-second"))
    assert execute(live_server, raw_key, "systemPrompt", PROMPT)[1]["value"] == "base-first-second"

    page.goto(f"{live_server.url}/admin/plugins_app/chainentry/")
    page.wait_for_url("**/chainentry/?account=*&hook=systemPrompt")
    assert chain_rows(page) == ["First", "Second"]
    rows = page.locator("#result_list tbody tr")
    assert page.locator("#result_list tbody td.field-place").all_inner_texts() == ["1", "2"]
    # The handle is visible: it has a size and says what it is for.
    assert rows.nth(0).locator(".handle").bounding_box()["width"] >= 30
    with page.expect_response(lambda r: "adminsortable2_update" in r.url) as update:
        drag(page, rows.nth(1).locator(".handle"), rows.nth(0).locator(".handle"))
    assert update.value.status == 200
    # The drop is confirmed and the positions follow the rows.
    page.wait_for_selector("#hub-chain-status .success")
    assert "1. Second, 2. First" in page.locator("#hub-chain-status").inner_text()
    assert chain_rows(page) == ["Second", "First"]
    assert page.locator("#result_list tbody td.field-place").all_inner_texts() == ["1", "2"]
    shoot(page, tmp_path, "chain")

    # The very next execute call runs the new order.
    status, body = execute(live_server, raw_key, "systemPrompt", PROMPT)
    assert status == 200
    assert body["value"] == "base-second-first"
    assert [t["plugin"] for t in body["trace"]] == ["second", "first"]
    page.reload()
    assert chain_rows(page) == ["Second", "First"]


def test_an_auditor_browses_the_cancel_log_and_cannot_change_it(page, live_server, tmp_path):
    account = Account.objects.create(name="acme")
    services.add_member("acme", "audrey", "auditor", password=PASSWORD)
    _, raw_key = ApiKey.issue(account, name="platform")
    plugins.install_plugin(account, name="Guard", language="javascript", source=(
        "globalThis.middleware.todoAdded = async (c, tools) => tools.cancel('no todos today');"))
    status, body = execute(live_server, raw_key, "todoAdded", {"sessionId": "42", "texts": ["write tests"]})
    assert status == 200 and body["outcome"] == "cancelled"
    entry = CancelLog.objects.get()

    log_in(page, live_server, "audrey")
    # The home page shows the latest cancel and leads to the whole log.
    assert "no todos today" in page.locator("#hub-cancels-title + ul").inner_text()
    page.click("text=The whole cancel log")
    page.wait_for_url("**/plugins_app/cancellog/?account__id__exact=*")
    assert page.locator("#result_list tbody tr").count() == 1
    assert page.get_by_text("no todos today").count() == 1
    # No add button, no bulk actions, no links anywhere to add or delete.
    assert page.locator("a.addlink").count() == 0
    assert page.locator("select[name=action]").count() == 0
    assert page.locator("a[href$='/add/'], a[href$='/delete/']").count() == 0

    with page.expect_download() as download:
        page.click("a.hub-export")
    assert "no todos today" in download.value.path().read_text()

    page.click("#result_list tbody tr th a")
    page.wait_for_url(f"**/plugins_app/cancellog/{entry.pk}/change/**")
    assert page.locator("pre.hub-code").inner_text().count('"write tests"') == 1
    # The only button on the page is the header's log-out.
    assert page.locator("#content [type=submit]").count() == 0
    assert page.locator("a.deletelink").count() == 0
    page.screenshot(path=str(tmp_path / "cancel-log-detail.png"), full_page=True)

    # Even a hand-made POST, with the session and a valid CSRF token, is refused.
    allow_console_error(page, "status of 403")
    status = page.evaluate("""async () => {
        const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
        const response = await fetch(window.location.href, {
            method: "POST", headers: {"X-CSRFToken": token, "Content-Type": "application/x-www-form-urlencoded"},
            body: "reason=rewritten&hook=systemPrompt"});
        return response.status;
    }""")
    assert status == 403
    entry.refresh_from_db()
    assert entry.reason == "no todos today"

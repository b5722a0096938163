"""In a real browser: an account admin saves a draft, sees the line diff, deploys it and rolls back, and
each takes effect on the platform's very next execute call; an auditor sees the history without buttons."""

import pytest

from accounts import services
from accounts.models import Account, ApiKey
from plugins_app.services.plugins import installations as plugins

from .conftest import PASSWORD, execute, log_in, set_editor

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROMPT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "base"}


def appender(suffix):
    return f"globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + {suffix!r};"


def prompt(live_server, raw_key):
    status, body = execute(live_server, raw_key, "systemPrompt", PROMPT)
    assert status == 200, body
    return body["value"]


def test_an_admin_deploys_a_draft_and_rolls_it_back(page, live_server):
    account = Account.objects.create(name="acme")
    services.add_member("acme", "alice", "admin", password=PASSWORD)
    _, raw_key = ApiKey.issue(account, name="platform")
    installation = plugins.install_plugin(account, name="Greeter", source=appender("-v1"), language="javascript")
    assert prompt(live_server, raw_key) == "base-v1"
    log_in(page, live_server, "alice")

    page.goto(f"{live_server.url}/admin/plugins_app/installation/{installation.pk}/change/")
    page.get_by_text("Version 1 is live").click()
    page.wait_for_selector("#hub-versions")
    page.select_option("#id_language", "javascript")
    # The draft editor starts from the live source; replace it (once its deferred script has built it).
    page.wait_for_function("window.hubEditor !== undefined")
    assert page.evaluate("window.hubEditor.state.doc.toString()") == appender("-v1") + "\n"   # kept with a final newline
    set_editor(page, appender("-v2"))
    page.fill("#id_note", "a louder greeting")
    page.click("#hub-draft input[type=submit]")
    page.wait_for_selector(".messagelist .success")
    assert "nothing that runs has changed" in page.locator(".messagelist").inner_text()
    assert prompt(live_server, raw_key) == "base-v1"
    # The default diff compares the two newest versions, line by line, marking the changed characters.
    assert page.locator("#hub-diff table.diff .diff_chg").all_inner_texts() == ["1", "2"]

    # One version live and never another: nothing to roll back to, so no button (issue 44 item 9).
    assert page.locator("#hub-rollback").count() == 0
    # Deploying and rolling back ask first; a dismissed question changes nothing.
    questions = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
    page.click("#version-2 button:has-text('Deploy version 2')")
    assert questions == ["Deploy Greeter from version 1 to version 2? It runs from the very next call."]
    assert page.locator("#hub-live-version").inner_text() == "1" and prompt(live_server, raw_key) == "base-v1"
    page.on("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    page.click("#version-2 button:has-text('Deploy version 2')")
    page.wait_for_selector(".messagelist .success")
    assert page.locator("#hub-live-version").inner_text() == "2"
    assert prompt(live_server, raw_key) == "base-v2"
    # Version 1 has been live: it is not offered as a draft.
    assert page.locator("#version-1 .hub-try-draft").inner_text() == "Try version 1"
    assert page.locator("#version-1 .hub-was-live").inner_text() == "was live"

    assert page.locator("#hub-rollback button").inner_text() == "Roll back to version 1"
    page.click("#hub-rollback button")
    assert questions[-1] == "Roll Greeter back from version 2 to version 1? It runs from the very next call."
    page.wait_for_selector(".messagelist .success")
    assert page.locator("#hub-live-version").inner_text() == "1"
    assert prompt(live_server, raw_key) == "base-v1"
    history = page.locator("#hub-deploys").inner_text()
    assert "alice" in history and "rolled back to version 1" in history and "deployed version 2" in history

    services.add_member("acme", "audrey", "auditor", password=PASSWORD)
    page.context.clear_cookies()
    log_in(page, live_server, "audrey")
    page.goto(f"{live_server.url}/admin/plugins_app/pluginversion/installation/{installation.pk}/")
    assert page.locator("#version-2").count() == 1
    assert page.locator(".hub-deploy, #hub-rollback, #hub-draft").count() == 0


@pytest.fixture
def eager_celery():
    """Shadow runs are Celery tasks; here they run in the live server's thread right after the answer."""
    from middleware_hub.celery import app
    saved = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


VETO = "globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('no: ' + c.text);"
INBOUND = {"sessionId": "10", "channelId": None, "text": "rm -rf /", "mediaIds": []}


def test_an_admin_puts_a_veto_in_shadow_reads_its_counts_and_promotes_it(page, live_server, eager_celery):
    account = Account.objects.create(name="acme")
    services.add_member("acme", "alice", "admin", password=PASSWORD)
    _, raw_key = ApiKey.issue(account, name="platform")
    guard = plugins.install_plugin(account, name="Guard", source=VETO, language="javascript")
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/pluginversion/installation/{guard.pk}/")
    page.click("#hub-to-shadow button")
    page.wait_for_selector(".messagelist .success")

    status, body = execute(live_server, raw_key, "userMessageInbound", INBOUND)
    assert (status, body["outcome"]) == (200, "unchanged")   # the shadowed veto does not block
    page.reload()
    assert page.locator("#hub-shadow-counts .would-cancel").inner_text() == "1"
    assert "no: rm -rf /" in page.locator("#hub-shadow-cancels").inner_text()

    page.click("#hub-promote button")
    page.wait_for_selector(".messagelist .success")
    assert page.locator("#hub-to-shadow").count() == 1   # live again: it can be shadowed anew
    status, body = execute(live_server, raw_key, "userMessageInbound", INBOUND)
    assert (status, body["outcome"], body["cancellation"]["reason"]) == (200, "cancelled", "no: rm -rf /")


def _luminance(rgb: str) -> float:
    """Relative luminance (WCAG) of a computed 'rgb(r, g, b)' colour."""
    channels = [int(x) / 255 for x in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3]]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_live_badge_is_readable_and_a_long_line_diff_stays_in_the_window(page, live_server):
    # Issue 33: the badge was pale green on white, and a diff of long lines made the page 1,870 px wide.
    account = Account.objects.create(name="acme")
    services.add_member("acme", "alice", "admin", password=PASSWORD)
    long_line = "const words = [" + ", ".join(f"'word{i}'" for i in range(80)) + "];\n"
    installation = plugins.install_plugin(account, name="Greeter", source=long_line + appender("-v1"),
                                          language="javascript")
    from plugins_app.services.versions import releases as versions
    versions.create_draft(account, installation.pk, source=long_line.replace("word1'", "WORD1'") + appender("-v2"),
                          language="javascript")
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/pluginversion/installation/{installation.pk}/")
    page.wait_for_selector("#hub-diff table.diff")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], width
    badge = page.locator("#version-1 .hub-live")
    colour, background = badge.evaluate("e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]")
    assert _contrast(colour, background) >= 4.5, (colour, background)

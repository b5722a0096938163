"""Headless Debian chromium driven by Playwright against pytest-django's live server."""

import json
import os
import urllib.error
import urllib.request

import pytest
from django.db import connections

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
PASSWORD = "a-long-browser-password"


@pytest.fixture
def page(monkeypatch, live_server, settings, tmp_path):
    """A fresh browser page. Function-scoped on purpose: Playwright's sync API keeps an event loop
    running in this thread while it is open, which Django's ORM refuses to share unless told to."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (HUB_TEST_BROWSER is set)")
    from playwright.sync_api import sync_playwright

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
            tab = context.new_page()
            tab.set_default_timeout(15_000)
            # Any console error or uncaught exception fails the test, unless the test expects it.
            tab.console_errors, tab.allowed_console_errors = [], []
            tab.on("console", lambda message: tab.console_errors.append(message.text) if message.type == "error" else None)
            tab.on("pageerror", lambda error: tab.console_errors.append(f"uncaught: {error}"))
            yield tab
            unexpected = [e for e in tab.console_errors if not any(a in e for a in tab.allowed_console_errors)]
            assert not unexpected, f"console errors: {unexpected}"
        finally:
            # While Playwright's loop runs, Django keeps this thread's connections apart from the
            # usual ones (it sees a running event loop); close them or they outlive the test.
            connections.close_all()
            browser.close()


def allow_console_error(page, text):
    """A console error the test causes on purpose (say, a refused request's 403)."""
    page.allowed_console_errors.append(text)


def shoot(page, tmp_path, name):
    """A full-page screenshot; with HUB_SCREENSHOTS_DIR set (make screenshots), also kept there for the docs."""
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    target = os.environ.get("HUB_SCREENSHOTS_DIR")
    if target:
        os.makedirs(target, exist_ok=True)
        page.screenshot(path=os.path.join(target, f"{name}.png"), full_page=True)


def log_in(page, live_server, username):
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")


def execute(live_server, raw_key, hook, context):
    """The platform's call: POST /api/v1/hooks/<hook>/execute with the account's API key."""
    request = urllib.request.Request(
        f"{live_server.url}/api/v1/hooks/{hook}/execute", data=json.dumps({"context": context}).encode(),
        headers={"Authorization": f"Bearer {raw_key}", "Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def set_editor(page, text):
    """Replace the code editor's whole text, as a paste would (the textarea behind it follows)."""
    page.evaluate("(text) => { const v = window.hubEditor; "
                  "v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: text } }); }", text)

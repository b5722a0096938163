"""In a real browser: the admin's Live page shows an account's cancel as it happens, plugin text as text."""

from dataclasses import replace

import pytest

from accounts import services
from accounts.models import Account, ApiKey
from plugins_app.services.observability import tail
from plugins_app.services.plugins import installations as plugins

from .conftest import PASSWORD, execute, log_in, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GATE = ("globalThis.middleware.userMessageInbound = async (c, tools) => {\n"
        "  host.log('warn', '<b>not bold</b> ' + c.text);\n"
        "  return tools.cancel('held: ' + c.text);\n};\n")
INBOUND = {"sessionId": "1", "channelId": None, "text": "hello", "mediaIds": []}


@pytest.fixture
def tailed(settings, tmp_path):
    settings.HUB_TAIL = replace(settings.HUB_TAIL, channel="file", directory=str(tmp_path / "tail"))
    tail.reset_channel()
    yield
    tail.reset_channel()


def test_the_live_page_shows_a_cancel_as_it_happens(page, live_server, tmp_path, tailed):
    account = Account.objects.create(name="acme")
    services.add_member("acme", "audrey", "auditor", password=PASSWORD)
    plugins.install_plugin(account, name="Gate", language="javascript", source=GATE)
    _, key = ApiKey.issue(account, name="browser")
    log_in(page, live_server, "audrey")
    page.goto(f"{live_server.url}/admin/plugins_app/cancellog/")
    page.click("a.hub-live")
    page.wait_for_url("**/cancellog/live/")
    page.click("#hub-live-form button[type=submit]")
    page.wait_for_function("document.getElementById('hub-live-state').textContent === 'live'")
    status, answer = execute(live_server, key, "userMessageInbound", INBOUND)
    assert status == 200 and answer["outcome"] == "cancelled"
    page.wait_for_selector("tr.hub-live-cancel")
    cancel = page.locator("tr.hub-live-cancel td").all_inner_texts()
    assert cancel[1:] == ["cancel", "userMessageInbound", "gate", "cancelled", "held: hello"]
    log = page.locator("tr.hub-live-log td").all_inner_texts()
    assert log[-1] == "[warn] <b>not bold</b> hello" and page.locator("#hub-live b").count() == 0
    shoot(page, tmp_path, "live")

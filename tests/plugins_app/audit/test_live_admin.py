"""The admin's Live page: the tail stream of an account the user sees, never another's."""

from __future__ import annotations

from dataclasses import replace

import pytest

from plugins_app.services.observability import tail, tail_channel

CANCELLER = "globalThis.middleware.userMessageInbound = async (c, tools) => tools.cancel('held: ' + c.text);"
INBOUND = {"sessionId": "1", "channelId": None, "text": "hello", "mediaIds": []}


@pytest.fixture
def file_tail(settings, tmp_path, monkeypatch):
    settings.HUB_TAIL = replace(settings.HUB_TAIL, channel="file", directory=str(tmp_path), max_seconds=30)
    monkeypatch.setattr(tail_channel, "CHECK_CACHE_SECONDS", 0.0)
    tail.reset_channel()
    yield
    tail.reset_channel()


def test_the_page_offers_only_the_users_accounts(login, account, other_account):
    client = login(account.name, "ann", "auditor")
    page = client.get("/admin/plugins_app/cancellog/live/")
    assert page.status_code == 200
    text = page.content.decode()
    assert f'<option value="{account.pk}">acme</option>' in text and "globex" not in text
    assert 'class="hub-live"' in client.get("/admin/plugins_app/cancellog/").content.decode()


def test_another_accounts_stream_is_404_and_a_bad_filter_400(login, account, other_account, file_tail):
    client = login(account.name, "ann", "auditor")
    assert client.get(f"/admin/plugins_app/cancellog/live/stream?account={other_account.pk}").status_code == 404
    assert client.get("/admin/plugins_app/cancellog/live/stream?account=x").status_code == 404
    bad = client.get(f"/admin/plugins_app/cancellog/live/stream?account={account.pk}&status=exploded")
    assert bad.status_code == 400 and b"exploded" in bad.content


def test_the_stream_shows_a_cancel_of_the_account_as_it_happens(login, account, other_account, install,
                                                                   api_client, other_api_client, file_tail):
    install(CANCELLER)
    install(CANCELLER, target=other_account)
    client = login(account.name, "ann", "auditor")
    response = client.get(f"/admin/plugins_app/cancellog/live/stream?account={account.pk}&status=cancelled")
    assert response["Content-Type"] == "text/event-stream"
    chunks = iter(response.streaming_content)
    assert b'"type": "ready"' in next(chunks)
    other_api_client.post("/api/v1/hooks/userMessageInbound/execute", {"context": {**INBOUND, "text": "theirs"}},
                          format="json")
    api_client.post("/api/v1/hooks/userMessageInbound/execute", {"context": INBOUND}, format="json")
    seen = []
    for chunk in chunks:
        if chunk.startswith(b"data:"):
            seen.append(chunk)
            if b'"type": "cancel"' in chunk:
                break
    response.close()
    assert b'"reason": "held: hello"' in seen[-1]
    assert all(b'"plugin": "plugin-1"' in chunk and b'"status": "cancelled"' in chunk for chunk in seen)
    assert tail._open.get(account.pk, 0) == 0   # closing the response gave the stream's place back

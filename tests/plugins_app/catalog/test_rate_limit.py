"""rate-limit through the real runtime and host.kv: the limit per window, per session or per agent, the
reason saying when to retry, and a new window counting afresh."""

import re
import time
from datetime import UTC, datetime

import pytest

from plugins_app.models import KvEntry

from ..catalog_support import execute, install_official

pytestmark = pytest.mark.django_db

DAY = 86400


def message(session="1", text="hi"):
    return {"sessionId": session, "channelId": None, "text": text, "mediaIds": []}


@pytest.fixture(autouse=True)
def not_at_midnight():
    # A day's window ends at 00:00 UTC; a test running across it would see two windows.
    if DAY - time.time() % DAY < 120:
        pytest.skip("too close to the end of the UTC day's window")


def outcomes(api_client, n, **kw):
    return [execute(api_client, "userMessageInbound", message(**kw)) for _ in range(n)]


def test_cancels_past_the_limit_and_says_when_to_retry(api_client, synced):
    install_official(api_client, "rate-limit", {"messages": 3, "windowSeconds": DAY}, grant=["host:kv"])
    results = outcomes(api_client, 4)
    assert [r["outcome"] for r in results] == ["unchanged", "unchanged", "unchanged", "cancelled"]
    reason = results[-1]["cancellation"]["reason"]
    next_day = datetime.fromtimestamp((time.time() // DAY + 1) * DAY, tz=UTC).isoformat().replace("+00:00", ".000Z")
    assert re.fullmatch(rf"rate limit: 3 messages per 86400 s for this session; retry in \d+ s \(at {re.escape(next_day)}\)",
                        reason), reason
    # Another session has its own count; the refused message did not add to the count.
    assert outcomes(api_client, 1, session="9")[0]["outcome"] == "unchanged"
    assert sorted(KvEntry.objects.values_list("number", flat=True)) == [1, 3]


def test_a_new_window_counts_afresh(api_client, synced):
    install_official(api_client, "rate-limit", {"messages": 1, "windowSeconds": DAY}, grant=["host:kv"])
    assert [r["outcome"] for r in outcomes(api_client, 2)] == ["unchanged", "cancelled"]
    entry = KvEntry.objects.get()
    # The count as the previous window left it: this window's first message goes through.
    start = int(entry.key.rsplit(":", 1)[1])
    entry.key = entry.key.replace(f":{start}", f":{start - DAY}")
    entry.save()
    assert [r["outcome"] for r in outcomes(api_client, 2)] == ["unchanged", "cancelled"]


def test_per_agent_without_a_known_agent_counts_the_session(api_client, synced):
    install_official(api_client, "rate-limit", {"messages": 2, "windowSeconds": DAY, "per": "agent"},
                     grant=["host:kv", "host:session"])
    # userMessageInbound's context names no agent (host.session.agentId is null there): the session counts alone.
    assert [r["outcome"] for r in outcomes(api_client, 3, session="5")] == ["unchanged", "unchanged", "cancelled"]
    assert KvEntry.objects.get().key.startswith("rate:session:5:")


def test_without_the_kv_grant_messages_pass(api_client, synced):
    install_official(api_client, "rate-limit", {"messages": 1, "windowSeconds": DAY})
    results = outcomes(api_client, 2)
    assert [r["outcome"] for r in results] == ["unchanged", "unchanged"]
    assert not KvEntry.objects.exists()

"""Cancel log and warning lists: account scoping, filters, pagination, and bad filters."""

from datetime import timedelta, timezone

import pytest

from plugins_app.models import CancelLog
from plugins_app.services.execution.chain_cache import chain_cache

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

VETO = "globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('no ' + c.text);"


def inbound(text, session="10"):
    return {"context": {"sessionId": session, "channelId": None, "text": text, "mediaIds": []}}


def test_cancellations_are_filtered_and_paginated(api_client, other_api_client, install, other_account):
    install(VETO, name="veto")
    install(VETO, name="veto", target=other_account)
    for i in range(5):
        api_client.post("/api/v1/hooks/userMessageInbound/execute", inbound(f"m{i}", session=str(100 + i % 2)),
                        format="json")
    other_api_client.post("/api/v1/hooks/userMessageInbound/execute", inbound("theirs"), format="json")
    page = api_client.get("/api/v1/cancellations?pageSize=2").json()
    assert page["count"] == 5 and len(page["results"]) == 2 and page["next"]
    assert page["results"][0]["reason"] == "no m4"   # newest first
    assert api_client.get("/api/v1/cancellations?sessionId=101").json()["count"] == 2
    assert api_client.get("/api/v1/cancellations?q=m3").json()["count"] == 1
    assert api_client.get("/api/v1/cancellations?hook=systemPrompt").json()["count"] == 0
    assert api_client.get("/api/v1/cancellations?plugin=veto&since=2000-01-01").json()["count"] == 5
    assert api_client.get("/api/v1/cancellations?until=2000-01-01").json()["count"] == 0
    theirs = other_api_client.get("/api/v1/cancellations").json()
    assert [r["reason"] for r in theirs["results"]] == ["no theirs"]


def test_bad_filters_are_400_naming_the_parameter(api_client):
    r = api_client.get("/api/v1/cancellations?since=yesterday")
    assert r.status_code == 400 and r.json()["error"]["field"] == "since"
    assert api_client.get("/api/v1/cancellations?hook=nope").status_code == 404
    assert api_client.get("/api/v1/warnings?kind=boom").status_code == 400


@pytest.mark.parametrize(("path", "query"), [
    ("cancellations", "since=2026-12-01T10:00:00%2B24:00"),   # an offset of a whole day
    ("warnings", "since=9999-12-31T23:59:59-01:00"),           # past year 9999 once in UTC
    ("usage", "until=0001-01-01T00:00:00%2B01:00"),            # before year 1 once in UTC
    ("changes", "until=2026-02-30"),                           # no such day
])
def test_moments_the_database_cannot_hold_are_400_naming_the_parameter(api_client, path, query):
    response = api_client.get(f"/api/v1/{path}?{query}")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["field"] == query.split("=")[0] and "ISO 8601" in error["message"]


def test_an_offset_moment_is_compared_in_utc(api_client, account):
    row = CancelLog.objects.create(account=account, hook="systemPrompt", plugin_slug="p", reason="r", context={})
    # A second after the row, written five hours east of UTC.
    later = (row.created_at.astimezone(timezone(timedelta(hours=5))) + timedelta(seconds=1)).isoformat()
    assert api_client.get("/api/v1/cancellations", {"since": later}).json()["count"] == 0
    assert api_client.get("/api/v1/cancellations", {"until": later}).json()["count"] == 1


def test_cancel_log_rows_are_immutable(api_client, install):
    install(VETO)
    api_client.post("/api/v1/hooks/userMessageInbound/execute", inbound("x"), format="json")
    row = CancelLog.objects.get()
    row.reason = "edited"
    with pytest.raises(Exception, match="cannot be changed"):
        row.save()
    with pytest.raises(Exception, match="cannot be deleted"):
        row.delete()
    assert CancelLog.objects.get().reason == "no x"


def test_chains_are_cached_until_the_change_marker_moves(api_client, install, account):
    a = install(appender("A"))
    b = install(appender("B"))
    run = lambda: api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json").json()
    before = chain_cache.loads
    run(), run(), run()
    assert chain_cache.loads == before + 1   # one load, then warm
    loads = chain_cache.loads
    api_client.put("/api/v1/chains/systemPrompt", {"order": [str(b.pk), str(a.pk)]}, format="json")
    assert run()["value"] == "baseBA"
    assert chain_cache.loads == loads + 1


def test_usage_lists_runs_per_plugin_per_hook_per_day(api_client, other_api_client, install):
    install(appender("A"), name="a")
    for _ in range(3):
        api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json")
    rows = api_client.get("/api/v1/usage").json()["results"]
    assert [(r["plugin"], r["hook"], r["runs"]) for r in rows] == [("a", "systemPrompt", 3)]
    assert rows[0]["averageMs"] == pytest.approx(rows[0]["totalMs"] / 3, abs=0.001)
    assert api_client.get("/api/v1/usage?until=2000-01-01").json()["count"] == 0
    assert api_client.get("/api/v1/usage?hook=todoAdded").json()["count"] == 0
    assert other_api_client.get("/api/v1/usage").json()["count"] == 0
    assert api_client.get("/api/v1/usage?since=soon").status_code == 400

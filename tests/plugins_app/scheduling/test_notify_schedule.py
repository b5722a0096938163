"""Setting a timer: POST /api/v1/notifications fires notifyScheduled, which may reword, clamp or cancel."""

from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from plugins_app.models import CancelLog, HandlerWarning, Notification, UsageDaily
from plugins_app.services.scheduling import notifications

pytestmark = pytest.mark.django_db

TIMER = {"sessionId": "18446744073709551615", "message": "Check the deploy", "delaySeconds": 300}
CLAMP = """globalThis.middleware.notifyScheduled = async (c) =>
  ({ delaySeconds: Math.min(c.delaySeconds, 60), message: "[timer] " + c.message });"""
CANCEL = """globalThis.middleware.notifyScheduled = async (c, tools) => tools.cancel("no timers on Fridays");"""


def post(client, **changes):
    return client.post("/api/v1/notifications", {**TIMER, **changes}, format="json")


def test_a_timer_is_scheduled_with_its_id_and_due_time(api_client):
    before = timezone.now()
    response = post(api_client)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["outcome"] == "scheduled"
    assert body["cancellation"] is None and body["trace"] == [] and body["effects"] == []
    note = body["notification"]
    assert isinstance(note["id"], str) and note["status"] == "scheduled"
    assert note["message"] == "Check the deploy" and note["delaySeconds"] == 300
    due = parse_datetime(note["dueAt"])
    assert before + timedelta(seconds=300) <= due <= timezone.now() + timedelta(seconds=300)
    assert Notification.objects.get(pk=int(note["id"])).due_at == due


def test_a_plugin_clamps_the_delay_and_rewords_the_message(api_client, install):
    install(CLAMP, name="clamp")
    body = post(api_client).json()
    assert body["outcome"] == "scheduled"
    note = body["notification"]
    assert (note["message"], note["delaySeconds"]) == ("[timer] Check the deploy", 60)
    assert (note["requestedMessage"], note["requestedDelaySeconds"]) == ("Check the deploy", 300)
    assert [(t["plugin"], t["status"], t["changed"]) for t in body["trace"]] == [("clamp", "ran", True)]
    due = parse_datetime(note["dueAt"])
    assert due - parse_datetime(note["createdAt"]) < timedelta(seconds=61)


def test_a_cancelled_timer_is_recorded_and_never_scheduled(api_client, install):
    install(CANCEL, name="no-fridays")
    response = post(api_client)
    assert response.status_code == 200
    body = response.json()
    assert body["outcome"] == "cancelled"
    assert body["cancellation"]["reason"] == "no timers on Fridays"
    note = body["notification"]
    assert note["status"] == "cancelled" and note["reason"] == "no timers on Fridays"
    assert note["cancelledBy"] == "no-fridays" and note["dueAt"] is None
    assert CancelLog.objects.get(hook="notifyScheduled").session_id == TIMER["sessionId"]
    assert notifications.due(100) == []


@pytest.mark.parametrize("returned", ["{ delaySeconds: -5 }", '{ delaySeconds: "soon" }', "{ delaySeconds: NaN }",
                                      "{ delaySeconds: Infinity }", "{ delaySeconds: 1e308 }",
                                      "{ delaySeconds: Number.MAX_SAFE_INTEGER + 2 }"])
def test_a_returned_delay_that_is_not_a_finite_number_from_zero_is_malformed(api_client, install, returned):
    install(f"globalThis.middleware.notifyScheduled = async () => ({returned});", name="broken")
    body = post(api_client).json()
    assert body["outcome"] == "scheduled"
    assert body["notification"]["delaySeconds"] == 300
    assert body["trace"][0]["status"] == "malformed"
    assert HandlerWarning.objects.get(hook="notifyScheduled").kind == "malformed"


def test_a_long_returned_delay_is_clamped_to_the_maximum(api_client, install, settings):
    settings.HUB_SCHEDULING = replace(settings.HUB_SCHEDULING, notify_max_delay_seconds=3600)
    install("globalThis.middleware.notifyScheduled = async () => ({ delaySeconds: 400 * 86400 });", name="long")
    body = post(api_client).json()
    assert body["notification"]["delaySeconds"] == 3600


@pytest.mark.parametrize("changes, field", [
    ({"sessionId": 18446744073709551615}, "sessionId"),
    ({"sessionId": ""}, "sessionId"),
    ({"message": None}, "message"),
    ({"message": "x" * 20_001}, "message"),
    ({"delaySeconds": -1}, "delaySeconds"),
    ({"delaySeconds": 1e308}, "delaySeconds"),            # finite, and more than any platform holds
    ({"delaySeconds": 2 ** 53}, "delaySeconds"),
    ({"delaySeconds": "300"}, "delaySeconds"),
    ({"delaySeconds": True}, "delaySeconds"),
    ({"delaySeconds": 10 ** 12}, "delaySeconds"),
])
def test_bad_input_is_refused_naming_the_field_and_fires_nothing(api_client, install, changes, field):
    install(CLAMP, name="clamp")
    response = post(api_client, **changes)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(field)
    assert not Notification.objects.exists()
    assert not UsageDaily.objects.exists()


def test_a_missing_field_is_refused(api_client):
    response = api_client.post("/api/v1/notifications", {"sessionId": "1", "message": "m"}, format="json")
    assert response.status_code == 400
    assert "delaySeconds" in response.json()["error"]["message"]


def test_zero_delay_is_due_at_once(api_client):
    body = post(api_client, delaySeconds=0).json()
    assert notifications.due(100) == [int(body["notification"]["id"])]


def test_listing_filters_by_session_and_status_and_is_scoped(api_client, other_api_client, install):
    post(api_client)
    post(api_client, sessionId="42")
    post(other_api_client)
    assert api_client.get("/api/v1/notifications").json()["count"] == 2
    only = api_client.get("/api/v1/notifications?sessionId=42").json()
    assert [n["sessionId"] for n in only["results"]] == ["42"]
    assert api_client.get("/api/v1/notifications?status=delivered").json()["count"] == 0
    assert api_client.get("/api/v1/notifications?status=bogus").status_code == 400


def test_a_timer_is_readable_by_id_only_in_its_account(api_client, other_api_client):
    note_id = post(api_client).json()["notification"]["id"]
    assert api_client.get(f"/api/v1/notifications/{note_id}").json()["id"] == note_id
    assert other_api_client.get(f"/api/v1/notifications/{note_id}").status_code == 404

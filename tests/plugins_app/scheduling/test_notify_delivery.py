"""Delivering due timers in eager mode: notifyDelivered once, signed delivery, retries, sweep, reclaim."""

from datetime import timedelta

import pytest
from django.utils import timezone

from plugins_app import tasks
from plugins_app.models import CancelLog, Notification, PlatformConfig, UsageDaily
from plugins_app.services.scheduling import notifications

pytestmark = pytest.mark.django_db

REWORD = """globalThis.middleware.notifyDelivered = async (c) => "wake up: " + c.message + " (#" + c.notifyId + ")";"""
DROP = """globalThis.middleware.notifyDelivered = async (c, tools) =>
  c.message.includes("stale") ? tools.cancel("stale reminder") : c.message;"""


def schedule(account, message="Check the deploy", delay=0, session_id="18446744073709551615"):
    note, _, _ = notifications.schedule(account, session_id=session_id, message=message, delay_seconds=delay)
    return note


def hook_runs(hook: str) -> int:
    return sum(UsageDaily.objects.filter(hook=hook).values_list("runs", flat=True))


def test_a_due_timer_is_reworded_and_delivered_signed(account, install, platform, eager):
    install(REWORD, name="reword")
    note = schedule(account)
    tasks.deliver_notification.apply(args=[note.pk])
    [call] = platform.calls_to("/notifications")
    assert call["signed"] is True
    assert call["body"] == {"notifyId": str(note.pk), "sessionId": "18446744073709551615",
                            "message": f"wake up: Check the deploy (#{note.pk})"}
    note.refresh_from_db()
    assert note.status == "delivered" and note.delivered_at is not None
    assert note.delivered_message == f"wake up: Check the deploy (#{note.pk})"


def test_a_timer_that_is_not_due_is_left_alone(account, platform, eager):
    note = schedule(account, delay=3600)
    tasks.deliver_notification.apply(args=[note.pk])
    note.refresh_from_db()
    assert note.status == "scheduled"
    assert platform.calls == []


def test_a_dropped_timer_is_recorded_and_not_delivered(account, install, platform, eager):
    install(DROP, name="dropper")
    note = schedule(account, message="a stale reminder")
    tasks.deliver_notification.apply(args=[note.pk])
    note.refresh_from_db()
    assert (note.status, note.reason, note.cancelled_by) == ("dropped", "stale reminder", "dropper")
    assert platform.calls == []
    assert CancelLog.objects.get(hook="notifyDelivered").reason == "stale reminder"


def test_duplicate_delivery_tasks_deliver_once_and_fire_the_hook_once(account, install, platform, eager):
    install(REWORD, name="reword")
    note = schedule(account)
    tasks.deliver_notification.apply(args=[note.pk], task_id="first")
    tasks.deliver_notification.apply(args=[note.pk], task_id="second")
    tasks.deliver_notification.apply(args=[note.pk], task_id="first")   # a redelivered message
    assert len(platform.calls_to("/notifications")) == 1
    assert hook_runs("notifyDelivered") == 1


def test_delivery_is_retried_without_firing_the_hook_again(account, install, platform, eager):
    install(REWORD, name="reword")
    eager.conf.task_eager_propagates = False   # an eager retry re-raises Retry after running the retries
    platform.fail("/notifications", 500, 503)
    note = schedule(account)
    tasks.deliver_notification.apply(args=[note.pk])
    attempts = [c for c in platform.calls if c["path"] == "/notifications"]
    assert [c["status"] for c in attempts] == [500, 503, 200]
    assert len({c["body"]["message"] for c in attempts}) == 1
    assert hook_runs("notifyDelivered") == 1
    note.refresh_from_db()
    assert note.status == "delivered" and note.last_error == ""


def test_delivery_gives_up_after_its_retries(account, platform, eager, monkeypatch):
    monkeypatch.setattr(tasks.deliver_notification, "max_retries", 1)
    eager.conf.task_eager_propagates = False
    platform.fail("/notifications", 503, 503, 503)
    note = schedule(account)
    tasks.deliver_notification.apply(args=[note.pk])
    note.refresh_from_db()
    assert (note.status, note.last_error) == ("failed", "the platform could not be reached")
    assert len(platform.calls) == 2


def test_a_timer_is_never_delivered_unsigned(account, platform, eager):
    PlatformConfig.objects.filter(account=account).update(signing_secret="")   # saved before secrets were required
    note = schedule(account)
    tasks.deliver_notification.apply(args=[note.pk])
    note.refresh_from_db()
    assert note.status == "failed" and "no signing secret" in note.last_error
    assert platform.calls == []


def test_a_refusal_that_will_not_change_is_not_retried(account, platform, eager):
    platform.fail("/notifications", 400)
    note = schedule(account)
    tasks.deliver_notification.apply(args=[note.pk])
    note.refresh_from_db()
    assert (note.status, note.last_error) == ("failed", "the platform could not be reached")
    assert len(platform.calls) == 1


def test_the_sweep_delivers_what_is_due_and_only_that(account, platform, eager):
    due = schedule(account, message="due")
    later = schedule(account, message="later", delay=3600)
    tasks.deliver_due_notifications.apply()
    assert [c["body"]["message"] for c in platform.calls_to("/notifications")] == ["due"]
    due.refresh_from_db()
    later.refresh_from_db()
    assert (due.status, later.status) == ("delivered", "scheduled")
    Notification.objects.filter(pk=later.pk).update(due_at=timezone.now() - timedelta(seconds=1))
    tasks.deliver_due_notifications.apply()
    assert [c["body"]["message"] for c in platform.calls_to("/notifications")] == ["due", "later"]


def test_the_sweep_does_not_hand_out_a_queued_timer_again_until_the_requeue_period(account, settings):
    note = schedule(account)
    assert notifications.due(100) == [note.pk]
    assert notifications.due(100) == []
    Notification.objects.filter(pk=note.pk).update(
        queued_at=timezone.now() - timedelta(seconds=settings.HUB_SCHEDULING.notify_requeue_seconds + 1))
    assert notifications.due(100) == [note.pk]


def test_a_delivery_whose_worker_vanished_is_reclaimed_without_refiring_the_hook(account, install, platform,
                                                                                 eager, settings):
    install(REWORD, name="reword")
    note = schedule(account)
    # A worker claimed it, ran notifyDelivered, then died; its message was lost with it.
    Notification.objects.filter(pk=note.pk).update(
        status="delivering", claimed_by="lost-task", hook_fired_at=timezone.now(), delivered_message="as reworded",
        claimed_at=timezone.now() - timedelta(seconds=settings.HUB_SCHEDULING.notify_reclaim_seconds + 1))
    tasks.deliver_notification.apply(args=[note.pk], task_id="someone-else")
    assert platform.calls == []
    tasks.deliver_due_notifications.apply()
    assert [c["body"]["message"] for c in platform.calls_to("/notifications")] == ["as reworded"]
    assert hook_runs("notifyDelivered") == 0
    note.refresh_from_db()
    assert note.status == "delivered" and note.claimed_by != "lost-task"


def test_a_recent_claim_is_not_reclaimed(account, platform, eager):
    note = schedule(account)
    Notification.objects.filter(pk=note.pk).update(status="delivering", claimed_by="busy-task",
                                                   claimed_at=timezone.now())
    tasks.deliver_due_notifications.apply()
    assert platform.calls == []
    note.refresh_from_db()
    assert note.claimed_by == "busy-task"

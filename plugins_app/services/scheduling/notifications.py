"""Agents' timers: notifyScheduled when one is set, then notifyDelivered and delivery when it is due."""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import Account
from plugins_app.errors import InvalidInput, PlatformError
from plugins_app.models import Notification
from plugins_app.runtime.tables.context import MAX_ID_LENGTH, is_platform_id
from plugins_app.runtime.web.chain import ChainResult
from plugins_app.services.execution.execute import execute_hook
from plugins_app.services.host import platform
from plugins_app.services.ids import get_in_account

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 20_000
Status = Notification.Status


def _check_request(session_id, message, delay_seconds) -> None:
    if not is_platform_id(session_id):
        raise InvalidInput("sessionId", f"expected the session's id as a non-empty string of at most {MAX_ID_LENGTH} characters")
    if not isinstance(message, str):
        raise InvalidInput("message", "expected a string")
    if len(message) > MAX_MESSAGE_CHARS:
        raise InvalidInput("message", f"over {MAX_MESSAGE_CHARS} characters")
    maximum = settings.HUB_SCHEDULING.notify_max_delay_seconds
    if (isinstance(delay_seconds, bool) or not isinstance(delay_seconds, (int, float))
            or not math.isfinite(delay_seconds) or not 0 <= delay_seconds <= maximum):
        raise InvalidInput("delaySeconds", f"expected a number of seconds from 0 to {maximum}")


def schedule(account, *, session_id, message, delay_seconds) -> tuple[Notification, ChainResult, list]:
    """Fire notifyScheduled and persist the timer it allows (or the cancel it answered)."""
    _check_request(session_id, message, delay_seconds)
    result, effects = execute_hook(account, "notifyScheduled", {
        "sessionId": session_id, "message": message, "delaySeconds": delay_seconds})
    common = dict(account=account, session_id=session_id, requested_message=message,
                  requested_delay_seconds=delay_seconds)
    if result.cancellation is not None:
        note = Notification.objects.create(
            **common, message=message, status=Status.CANCELLED, reason=result.cancellation.reason[:500],
            cancelled_by=result.cancellation.plugin)
        return note, result, effects
    # A plugin may return any finite delay >= 0; beyond the maximum it is clamped, not an error.
    delay = min(float(result.context["delaySeconds"]), settings.HUB_SCHEDULING.notify_max_delay_seconds)
    note = Notification.objects.create(
        **common, message=result.context["message"], delay_seconds=delay, status=Status.SCHEDULED,
        due_at=timezone.now() + timedelta(seconds=delay))
    return note, result, effects


def get(account, notification_id, field: str = "notificationId") -> Notification:
    return get_in_account(Notification.objects.all(), account, notification_id, field,
                          f"notification {notification_id} not found")


def listing(account: Account, params: Mapping[str, Any]) -> QuerySet[Notification]:
    qs = Notification.objects.filter(account=account)
    if params.get("sessionId"):
        qs = qs.filter(session_id=params["sessionId"])
    if params.get("status"):
        if params["status"] not in Status.values:
            raise InvalidInput("status", "expected one of " + ", ".join(Status.values))
        qs = qs.filter(status=params["status"])
    return qs.order_by("-created_at", "-id")


# --- delivery ------------------------------------------------------------------------------------

def due(limit: int) -> list[int]:
    """Timers that are due and not handed to a worker in the last requeue period; marks them queued.
    Timers whose delivery was claimed long ago and never finished (a lost message) are reclaimed."""
    now = timezone.now()
    requeue = now - timedelta(seconds=settings.HUB_SCHEDULING.notify_requeue_seconds)
    ids = list(Notification.objects.filter(status=Status.SCHEDULED, due_at__lte=now)
               .exclude(queued_at__gte=requeue).order_by("due_at").values_list("pk", flat=True)[:limit])
    if ids:
        Notification.objects.filter(pk__in=ids, status=Status.SCHEDULED).update(queued_at=now)
    return ids


def stale_claims(limit: int) -> list[tuple[int, str]]:
    """Deliveries claimed longer ago than any retry schedule lasts: hand each to a new claim id."""
    cutoff = timezone.now() - timedelta(seconds=settings.HUB_SCHEDULING.notify_reclaim_seconds)
    reclaimed = []
    for pk, old in (Notification.objects.filter(status=Status.DELIVERING, claimed_at__lt=cutoff)
                    .values_list("pk", "claimed_by")[:limit]):
        claim = uuid.uuid4().hex
        if Notification.objects.filter(pk=pk, status=Status.DELIVERING, claimed_by=old).update(
                claimed_by=claim, claimed_at=timezone.now()):
            reclaimed.append((pk, claim))
    return reclaimed


def deliver(notification_id: int, *, claim: str) -> Notification | None:
    """Deliver one due timer under `claim` (the delivery task's id, kept across its retries).
    notifyDelivered fires at most once; a temporary platform failure raises PlatformError to retry."""
    now = timezone.now()
    Notification.objects.filter(pk=notification_id, status=Status.SCHEDULED, due_at__lte=now).update(
        status=Status.DELIVERING, claimed_by=claim, claimed_at=now)
    note = Notification.objects.select_related("account").filter(pk=notification_id).first()
    if note is None or note.status != Status.DELIVERING or note.claimed_by != claim:
        return note   # not due, already handled, or another task's
    if note.hook_fired_at is None:
        note = _fire_delivered(note, claim)
        if note.status != Status.DELIVERING:
            return note
    try:
        platform.call(note.account, "/notifications", {
            "notifyId": str(note.pk), "sessionId": note.session_id,
            "message": note.message if note.delivered_message is None else note.delivered_message})
    except PlatformError as exc:
        if exc.retryable:
            Notification.objects.filter(pk=note.pk, claimed_by=claim).update(last_error=str(exc)[:500])
            raise
        delivery_failed(note.pk, claim, str(exc))
    else:
        Notification.objects.filter(pk=note.pk, status=Status.DELIVERING, claimed_by=claim).update(
            status=Status.DELIVERED, delivered_at=timezone.now(), last_error="")
    note.refresh_from_db()
    return note


def _fire_delivered(note: Notification, claim: str) -> Notification:
    # Claimed before the hook runs: a crash mid-hook loses the rewrite, never fires it twice.
    if not Notification.objects.filter(pk=note.pk, claimed_by=claim, hook_fired_at__isnull=True).update(
            hook_fired_at=timezone.now()):
        note.refresh_from_db()
        return note
    result, _ = execute_hook(note.account, "notifyDelivered", {
        "sessionId": note.session_id, "notifyId": str(note.pk), "message": note.message})
    if result.cancellation is not None:
        Notification.objects.filter(pk=note.pk, status=Status.DELIVERING, claimed_by=claim).update(
            status=Status.DROPPED, reason=result.cancellation.reason[:500],
            cancelled_by=result.cancellation.plugin)
    else:
        Notification.objects.filter(pk=note.pk, claimed_by=claim).update(
            delivered_message=result.context["message"])
    note.refresh_from_db()
    return note


def delivery_failed(notification_id: int, claim: str, reason: str) -> None:
    """Give up on a delivery (retries exhausted or a permanent refusal)."""
    if Notification.objects.filter(pk=notification_id, status=Status.DELIVERING, claimed_by=claim).update(
            status=Status.FAILED, last_error=reason[:500]):
        logger.warning("timer %s could not be delivered: %s", notification_id, reason)

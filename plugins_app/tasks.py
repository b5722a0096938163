"""Celery tasks: each takes ids, calls a scheduling service, and is safe to retry or run twice."""

from celery import shared_task
from django.conf import settings

from plugins_app.errors import PlatformError
from plugins_app.services.kv import store as kv_store
from plugins_app.services.scheduling import cron, notifications
from plugins_app.services.versions import recording, shadow

# Deliveries to the platform: Celery retries a temporary failure with exponential backoff; the
# message is acknowledged only once the task finished, so a worker that dies mid-task loses nothing.
delivery_task = shared_task(bind=True, autoretry_for=(PlatformError,), retry_backoff=True, retry_jitter=True,
                            retry_backoff_max=settings.HUB_SCHEDULING.delivery_backoff_max_seconds,
                            max_retries=settings.HUB_SCHEDULING.delivery_max_retries, acks_late=True,
                            reject_on_worker_lost=True)


def _last_attempt(task) -> bool:
    return task.request.retries >= task.max_retries


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True)
def fire_cron_slot(self, job_id: int, slot_at: str | None = None):
    """Beat's slot of a cron job; the job and the slot's time (SlotScheduler sends it) identify the
    slot, so a redelivery, or the same slot from a second beat, fires nothing new."""
    cron.fire_scheduled_slot(job_id, slot_at)


@delivery_task
def dispatch_mission(self, run_id: int):
    try:
        cron.dispatch(run_id)
    except PlatformError as exc:
        if not _last_attempt(self):
            raise
        cron.dispatch_failed(run_id, str(exc))


@shared_task
def fire_cron_completed(run_id: int):
    cron.fire_completed(run_id)


@shared_task
def deliver_due_notifications() -> None:
    """Beat's sweep: the database, not the broker, knows which timers are due."""
    batch = settings.HUB_SCHEDULING.notify_sweep_batch
    for notification_id in notifications.due(batch):
        deliver_notification.delay(notification_id)
    for notification_id, claim in notifications.stale_claims(batch):
        deliver_notification.apply_async((notification_id,), task_id=claim)


@delivery_task
def deliver_notification(self, notification_id: int):
    try:
        notifications.deliver(notification_id, claim=self.request.id)
    except PlatformError as exc:
        if not _last_attempt(self):
            raise
        notifications.delivery_failed(notification_id, self.request.id, str(exc))


@shared_task(ignore_result=True)
def run_shadow(account_id: int, hook: str, context: dict, hop: int = 0, turn_id: str = "", steps: list | None = None):
    """Shadow handlers of one execute call, after its answer went out (services/versions/shadow.py)."""
    shadow.run(account_id, hook, context, hop, turn_id, steps)


@shared_task(ignore_result=True)
def sweep_kv() -> int:
    """Beat's sweep of expired host.kv keys (reads skip them already; this gives their room back)."""
    return kv_store.sweep()


@shared_task(ignore_result=True)
def prune_recorded_calls() -> int:
    """Beat's sweep of recorded calls past their age bound, in every account: a write prunes only the hook
    it wrote to, which an account that stopped calling never triggers."""
    return recording.prune_expired()

"""Celery application for Middleware Hub, configured from Django settings (CELERY_*)."""
import logging
import os
from typing import Any

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, worker_process_shutdown, worker_ready
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "middleware_hub.settings")

from django.conf import settings  # read once DJANGO_SETTINGS_MODULE is set (above)

from plugins_app.services.scheduling import task_queue
from plugins_app.services.scheduling.task_queue import DELIVER_DUE_NOTIFICATIONS, PRUNE_RECORDED_CALLS, SWEEP_KV
from plugins_app.services.versions.config import PRUNE_EVERY_SECONDS

app = Celery("middleware_hub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Shadow runs, cron and timers each on a queue of their own (task_queue.ROUTES); a worker given no -Q
# consumes every queue named here, one given `-Q cron` only that one (docs/production.md).
app.conf.task_default_queue = task_queue.DEFAULT_QUEUE
app.conf.task_queues = [Queue(name, Exchange(name, type="direct"), routing_key=name) for name in task_queue.QUEUES]
app.conf.task_routes = {name: {"queue": queue} for name, queue in task_queue.ROUTES.items()}

# Beat's DatabaseScheduler copies this entry into its table at start; cron jobs' own entries are
# written there by plugins_app.services.scheduling.cron.
app.conf.beat_schedule = {
    "deliver-due-notifications": {
        "task": DELIVER_DUE_NOTIFICATIONS,
        "schedule": settings.HUB_SCHEDULING.notify_sweep_seconds,
        # A sweep that waited longer than a few periods is superseded by the next one.
        "options": {"expires": max(settings.HUB_SCHEDULING.notify_sweep_seconds * 5, 10)},
    },
    "sweep-expired-kv": {"task": SWEEP_KV, "schedule": settings.HUB_KV.sweep_seconds,
                         "options": {"expires": settings.HUB_KV.sweep_seconds}},
    "prune-recorded-calls": {"task": PRUNE_RECORDED_CALLS, "schedule": PRUNE_EVERY_SECONDS,
                             "options": {"expires": PRUNE_EVERY_SECONDS}},
}


@after_setup_logger.connect
@after_setup_task_logger.connect
def quiet_logs(logger: logging.Logger, **kwargs: Any) -> None:
    from middleware_hub.log_filters import install_on

    install_on(logger)


@worker_ready.connect
def send_spooled_tasks(**kwargs: Any) -> None:
    # Tasks a web process could not queue while the broker was away are sent from here too, even
    # when no web process enqueues anything more.
    task_queue.outbox.start()


@worker_process_shutdown.connect
def flush_metering(**kwargs: Any) -> None:
    # Pool processes leave without running atexit handlers: write buffered usage first.
    from plugins_app.services.observability.latency import recorder
    from plugins_app.services.observability.metering import meter
    from plugins_app.services.observability.metrics import deferred

    meter.flush()
    recorder.flush()
    deferred.apply()
    task_queue.outbox.stop()   # what it had not sent yet is left in the spool

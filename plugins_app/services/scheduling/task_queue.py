"""Celery tasks by name and the queues they go to: services queue work here and never import tasks.py,
which imports them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from celery import current_app
from celery.app.task import Task
from django.conf import settings

from plugins_app.services.scheduling.outbox import Outbox

FIRE_CRON_SLOT = "plugins_app.tasks.fire_cron_slot"
DISPATCH_MISSION = "plugins_app.tasks.dispatch_mission"
FIRE_CRON_COMPLETED = "plugins_app.tasks.fire_cron_completed"
DELIVER_DUE_NOTIFICATIONS = "plugins_app.tasks.deliver_due_notifications"
RUN_SHADOW = "plugins_app.tasks.run_shadow"
DELIVER_NOTIFICATION = "plugins_app.tasks.deliver_notification"
SWEEP_KV = "plugins_app.tasks.sweep_kv"
PRUNE_RECORDED_CALLS = "plugins_app.tasks.prune_recorded_calls"

# Each kind of work has a queue of its own, so a backlog of one (thousands of shadow runs) cannot
# delay another (a cron slot, with its grace period). A worker started without -Q consumes them all.
DEFAULT_QUEUE = "celery"
ROUTES = {
    FIRE_CRON_SLOT: "cron", DISPATCH_MISSION: "cron", FIRE_CRON_COMPLETED: "cron",
    DELIVER_DUE_NOTIFICATIONS: "timers", DELIVER_NOTIFICATION: "timers", SWEEP_KV: "timers",
    PRUNE_RECORDED_CALLS: "timers",
    RUN_SHADOW: "shadow",
}
QUEUES = [DEFAULT_QUEUE, *dict.fromkeys(ROUTES.values())]

# One loader at a time: a second thread that found the task missing while the first was importing
# tasks.py would see the module half-imported (in sys.modules, its tasks not yet registered) and fail
# with NotRegistered (issue 29: shadow runs lost when a fresh web worker's first calls came together).
_loading = threading.Lock()


def task(task_name: str) -> Task:
    """The registered task; a web process loads the apps' task modules the first time it asks
    (a worker loads them when it starts)."""
    if task_name not in current_app.tasks:
        with _loading:
            if task_name not in current_app.tasks:
                current_app.loader.import_default_modules()   # Celery's autodiscovery of each app's tasks.py
    return current_app.tasks[task_name]


PUBLISH_TIMEOUT_SECONDS = 2   # the outbox thread's wait on a broker that is away, before it spools


class _Publisher:
    """The outbox thread's own broker connection: one try with a short timeout, no retries (the
    outbox keeps what the broker refused and offers it again itself). Celery's shared producers
    would wait for the broker to come back, however long that takes."""

    def __init__(self) -> None:
        self.producer: Any = None   # a kombu Producer on the connection below
        self.url: str | None = None

    def __call__(self, task_name: str, args: list) -> None:
        if self.producer is not None and self.url != current_app.conf.broker_url:   # reconfigured (tests)
            self.producer.connection.release()
            self.producer = None
        if self.producer is None:
            self.url = current_app.conf.broker_url
            connection = current_app.connection_for_write(connect_timeout=PUBLISH_TIMEOUT_SECONDS, transport_options={
                "max_retries": 0, "socket_timeout": PUBLISH_TIMEOUT_SECONDS,
                "socket_connect_timeout": PUBLISH_TIMEOUT_SECONDS})
            self.producer = current_app.amqp.Producer(connection)
        try:
            task(task_name).apply_async(tuple(args), retry=False, producer=self.producer)
        except Exception:
            self.producer.connection.release()
            self.producer = None
            raise


outbox = Outbox(lambda: Path(settings.VAR_DIR) / "task-spool", _Publisher())


def enqueue(task_name: str, *args: object) -> None:
    """Queue a registered task: handed to this process's outbox, which publishes it off the caller's
    path and keeps it on disk while the broker is away (run in the caller when Celery is set to run
    tasks eagerly)."""
    if current_app.conf.task_always_eager:
        task(task_name).delay(*args)   # the registry, unlike send_task, honours task_always_eager
        return
    outbox.put(task_name, list(args))

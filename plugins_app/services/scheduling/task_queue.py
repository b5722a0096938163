"""Celery tasks by name: services queue work here and never import tasks.py, which imports them."""

from __future__ import annotations

import threading

from celery import current_app
from celery.app.task import Task

FIRE_CRON_SLOT = "plugins_app.tasks.fire_cron_slot"
DISPATCH_MISSION = "plugins_app.tasks.dispatch_mission"
FIRE_CRON_COMPLETED = "plugins_app.tasks.fire_cron_completed"
DELIVER_DUE_NOTIFICATIONS = "plugins_app.tasks.deliver_due_notifications"
RUN_SHADOW = "plugins_app.tasks.run_shadow"

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


def enqueue(task_name: str, *args: object) -> None:
    """Queue a registered task (run in the caller when Celery is set to run tasks eagerly)."""
    # The registry, unlike send_task, honours task_always_eager.
    task(task_name).delay(*args)

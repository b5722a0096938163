"""A backlog of shadow runs does not hold up cron (issue 29, item 7: one queue for everything let
~3,000 queued shadow runs make a cron slot 21 s late): each kind of work has its own queue, and one
worker consuming them all takes from each in turn."""

import re

import pytest

from middleware_hub.celery import app
from plugins_app.services.scheduling import task_queue

from .celery_services import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
BACKLOG = 300


def test_a_cron_task_queued_behind_a_shadow_backlog_runs_before_the_backlog_is_done(celery):
    # Queued while no worker runs: the shadow runs first (of an account that does not exist: each
    # returns at once), then one cron task (a completion of a run that does not exist: a no-op).
    with app.producer_or_acquire() as producer:
        for _ in range(BACKLOG):
            task_queue.task(task_queue.RUN_SHADOW).apply_async((0, "systemPrompt", {}), producer=producer)
        task_queue.task(task_queue.FIRE_CRON_COMPLETED).apply_async((0,), producer=producer)
    celery.start("worker")
    ran = re.compile(r"fire_cron_completed\[[^\]]+\] succeeded")
    log = wait_until(lambda: (lambda text: text if ran.search(text) else None)(celery.log("worker-1")),
                     60, "the cron task to run", details=celery.logs)
    before = log[:ran.search(log).start()]
    shadow_runs_first = len(re.findall(r"run_shadow\[[^\]]+\] succeeded", before))
    # One queue (first in, first out) ran all 300 first; with queues of their own, a handful at most.
    assert shadow_runs_first < BACKLOG // 10, shadow_runs_first

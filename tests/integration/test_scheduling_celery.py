"""Cron slots and timers end to end: real Redis, a Celery worker and beat, and a signed platform stub."""

from dataclasses import replace

import pytest
from django.utils import timezone

from accounts.models import ApiKey
from plugins_app import tasks
from plugins_app.models import CronRun, Notification, PluginLog
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.scheduling import cron
from tests.spec_examples import OWN

from .celery_services import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# The project's copy: the spec's own file is proved the same at the API (tests/plugins_app/plugins/test_spec_examples.py).
SENTINEL = OWN.read("cron-sentinel.ts")
REWORD = """globalThis.middleware.notifyDelivered = async (c) => "wake up: " + c.message;"""
WAIT = 60


@pytest.fixture
def sentinel(account):
    return plugins.install_plugin(account, name="cron-sentinel", source=SENTINEL, language="typescript")


@pytest.fixture
def client(account):
    from rest_framework.test import APIClient

    _, raw = ApiKey.issue(account, name="integration")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def interval_job(account, settings, prompt="Summarise the on-call pages.", every=2):
    settings.HUB_SCHEDULING = replace(settings.HUB_SCHEDULING, cron_min_interval_seconds=1)
    return cron.create_job(account, agent_id="18446744073709551615", kind="heartbeat", name="Pager digest",
                           prompt=prompt, interval_seconds=every)


def runs_of(job, **filters):
    return list(CronRun.objects.filter(job=job, **filters).order_by("slot_at", "id"))


def test_a_beat_slot_fires_and_the_platform_receives_the_rewritten_prompt(account, settings, sentinel, platform,
                                                                           celery):
    celery.start("worker")
    celery.start("beat")
    job = interval_job(account, settings)
    [call] = platform.wait_for("/missions", timeout=WAIT)
    assert call["signed"] is True
    assert call["body"]["prompt"] == ('Summarise the on-call pages.\n\n[cron-sentinel] fired heartbeat "Pager digest".')
    assert call["body"]["cronJobId"] == str(job.pk) and call["body"]["agentId"] == "18446744073709551615"
    run = wait_until(lambda: CronRun.objects.filter(pk=int(call["body"]["cronJobRunId"]), status="running").first(),
                     WAIT, "the run to be running", details=celery.logs)
    assert run.trigger == "schedule" and run.prompt == call["body"]["prompt"]
    assert run.session_id and run.dispatched_at is not None


def test_a_cancelled_slot_shows_cancelled_with_its_reason_and_nothing_is_dispatched(account, settings, sentinel,
                                                                                   platform, celery):
    celery.start("worker")
    celery.start("beat")
    job = interval_job(account, settings, prompt="Rotate the keys #hold")
    run = wait_until(lambda: CronRun.objects.filter(job=job).first(), WAIT, "a slot of the job", details=celery.logs)
    run = wait_until(lambda: CronRun.objects.filter(pk=run.pk).exclude(status="firing").first(), WAIT,
                     "cronJobFiring to answer", details=celery.logs)
    assert run.status == "cancelled"
    assert run.reason == "[cron-sentinel] refused: prompt carries #hold"
    assert run.cancelled_by == "cron-sentinel"
    # Cancelled runs are not active, so the next slot fires too, and is cancelled too.
    wait_until(lambda: len(runs_of(job, status="cancelled")) >= 2, WAIT, "a second cancelled slot",
               details=celery.logs)
    assert platform.calls_to("/missions") == []


def test_an_overlapping_slot_is_skipped_and_recorded(account, settings, sentinel, platform, celery):
    celery.start("worker")
    celery.start("beat")
    job = interval_job(account, settings, every=1)
    [mission] = platform.wait_for("/missions", timeout=WAIT)
    skipped = wait_until(lambda: runs_of(job, status="skipped"), WAIT, "a skipped slot", details=celery.logs)
    assert f"overlaps run {mission['body']['cronJobRunId']}" in skipped[0].reason
    cron.update_job(account, job.pk, enabled=False)
    assert len(platform.calls_to("/missions")) == 1
    assert [r.status for r in runs_of(job)].count("running") == 1


def test_cron_job_completed_fires_exactly_once_under_a_duplicate_complete(account, settings, sentinel, platform,
                                                                          client, celery):
    celery.start("worker")
    job = interval_job(account, settings, every=3600)   # no beat: slots come from /run only
    run_id = client.post(f"/api/v1/cron-jobs/{job.pk}/run").json()["id"]
    wait_until(lambda: CronRun.objects.filter(pk=int(run_id), status="running").exists(), WAIT,
               "the mission to be dispatched", details=celery.logs)

    first = client.post(f"/api/v1/cron-runs/{run_id}/complete", {"status": "completed"}, format="json")
    assert first.status_code == 200, first.json()
    message = f"[cron-sentinel] completed run {run_id} of cronJob {job.pk}: completed"
    wait_until(lambda: PluginLog.objects.filter(message=message).exists(), WAIT, "cronJobCompleted to fire",
               details=celery.logs)
    second = client.post(f"/api/v1/cron-runs/{run_id}/complete", {"status": "completed"}, format="json")
    assert second.status_code == 409

    # A duplicated task message too; then a marker through the same single-process FIFO queue.
    tasks.fire_cron_completed.delay(int(run_id))
    assert client.post(f"/api/v1/cron-jobs/{job.pk}/run").json()["status"] == "dispatching"
    platform.wait_for("/missions", count=2, timeout=WAIT)
    assert PluginLog.objects.filter(hook="cronJobCompleted").count() == 1
    assert CronRun.objects.get(pk=int(run_id)).status == "completed"


def test_a_timer_is_delivered_after_its_delay(account, platform, client, celery):
    plugins.install_plugin(account, name="reword", source=REWORD, language="javascript")
    celery.start("worker")
    celery.start("beat")
    body = client.post("/api/v1/notifications", {"sessionId": "42", "message": "stand-up", "delaySeconds": 2},
                       format="json").json()
    note_id = body["notification"]["id"]
    [call] = platform.wait_for("/notifications", timeout=WAIT)
    received = timezone.now()
    assert call["signed"] is True
    assert call["body"] == {"notifyId": note_id, "sessionId": "42", "message": "wake up: stand-up"}
    note = wait_until(lambda: Notification.objects.filter(pk=int(note_id), status="delivered").first(), WAIT,
                      "the timer to be marked delivered", details=celery.logs)
    assert note.due_at <= note.delivered_at and note.due_at <= received


def test_a_timer_survives_a_worker_restart(account, platform, client, celery):
    worker = celery.start("worker")
    celery.start("beat")
    body = client.post("/api/v1/notifications", {"sessionId": "42", "message": "still here?", "delaySeconds": 3},
                       format="json").json()
    celery.kill(worker)
    due_at = Notification.objects.get(pk=int(body["notification"]["id"])).due_at
    # Nobody can deliver it now; once it is due, a new worker must.
    wait_until(lambda: timezone.now() > due_at, WAIT, "the timer to fall due")
    assert platform.calls_to("/notifications") == []
    celery.start("worker")
    [call] = platform.wait_for("/notifications", timeout=WAIT)
    assert call["body"]["message"] == "still here?"
    wait_until(lambda: Notification.objects.filter(pk=int(body["notification"]["id"]), status="delivered").exists(),
               WAIT, "the timer to be marked delivered", details=celery.logs)

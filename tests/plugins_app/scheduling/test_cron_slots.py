"""Cron slots in eager mode: overlap check, cronJobFiring, signed dispatch with retries, and completion."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from plugins_app import tasks
from plugins_app.models import CancelLog, CronJob, CronRun, PlatformConfig, UsageDaily
from plugins_app.services.scheduling import cron

from ..scheduling_support import COMPLETED_COUNTER, FIRING_REWRITE

pytestmark = pytest.mark.django_db

MISSION_KEYS = {"cronJobId", "cronJobRunId", "agentId", "kind", "name", "prompt"}


@pytest.fixture
def job(account, install):
    install(FIRING_REWRITE, name="rewriter")
    install(COMPLETED_COUNTER, name="observer")
    return cron.create_job(account, agent_id="18446744073709551615", name="Nightly report",
                           prompt="Write the nightly report.", cron_expression="0 2 * * *")


def hook_runs(hook: str) -> int:
    return sum(UsageDaily.objects.filter(hook=hook).values_list("runs", flat=True))


def run_now(client, job, capture):
    with capture(execute=True):
        response = client.post(f"/api/v1/cron-jobs/{job.pk}/run")
    assert response.status_code == 201, response.json()
    return response.json()


def test_a_slot_dispatches_the_rewritten_prompt_to_the_platform(api_client, job, platform, eager,
                                                                  django_capture_on_commit_callbacks):
    body = run_now(api_client, job, django_capture_on_commit_callbacks)
    assert body["status"] == "dispatching"
    assert body["prompt"] == "Write the nightly report. [checked]"
    assert body["trigger"] == "manual"
    [call] = platform.calls_to("/missions")
    assert call["signed"] is True
    assert set(call["body"]) == MISSION_KEYS
    assert call["body"] == {"cronJobId": str(job.pk), "cronJobRunId": body["id"], "agentId": "18446744073709551615",
                            "kind": "cron_job", "name": "Nightly report",
                            "prompt": "Write the nightly report. [checked]"}
    run = api_client.get(f"/api/v1/cron-runs/{body['id']}").json()
    assert run["status"] == "running"
    assert run["sessionId"].startswith("9007199254740993")
    assert run["dispatchedAt"] is not None and run["finishedAt"] is None


def test_a_cancelled_slot_is_recorded_with_its_reason_and_never_dispatched(api_client, job, platform, eager,
                                                                           django_capture_on_commit_callbacks):
    cron.update_job(job.account, job.pk, prompt="Nightly report #hold")
    body = run_now(api_client, job, django_capture_on_commit_callbacks)
    assert body["status"] == "cancelled"
    assert body["reason"] == "held for maintenance"
    assert body["cancelledBy"] == "rewriter"
    assert body["finishedAt"] is not None
    assert platform.calls == []
    assert CancelLog.objects.get(hook="cronJobFiring").reason == "held for maintenance"
    history = api_client.get(f"/api/v1/cron-jobs/{job.pk}/runs").json()["results"]
    assert [(r["status"], r["reason"]) for r in history] == [("cancelled", "held for maintenance")]


def test_an_overlapping_slot_is_skipped_without_firing_the_hook(api_client, job, platform, eager,
                                                                 django_capture_on_commit_callbacks):
    first = run_now(api_client, job, django_capture_on_commit_callbacks)
    second = run_now(api_client, job, django_capture_on_commit_callbacks)
    assert second["status"] == "skipped"
    assert f"run {first['id']}" in second["reason"] and "running" in second["reason"]
    assert hook_runs("cronJobFiring") == 1
    assert len(platform.calls_to("/missions")) == 1
    statuses = [r["status"] for r in api_client.get(f"/api/v1/cron-jobs/{job.pk}/runs").json()["results"]]
    assert statuses == ["skipped", "running"]


def test_the_same_slot_delivered_twice_fires_once(job, platform, eager, django_capture_on_commit_callbacks):
    slot = {"slot_at": "2026-12-05T02:00:00.412+00:00"}
    with django_capture_on_commit_callbacks(execute=True):
        tasks.fire_cron_slot.apply(args=[job.pk], kwargs=slot, task_id="slot-1")
        tasks.fire_cron_slot.apply(args=[job.pk], kwargs=slot, task_id="slot-1")
    assert CronRun.objects.count() == 1
    assert CronRun.objects.get().trigger == "schedule"
    assert hook_runs("cronJobFiring") == 1
    assert len(platform.calls_to("/missions")) == 1


def test_one_slot_sent_by_two_beats_fires_once(job, platform, eager, django_capture_on_commit_callbacks):
    # Two `celery beat` processes each send the 02:00 slot, seconds apart, as tasks of their own ids
    # (issue 40, item 9: every slot fired twice): the run row, one per job and slot, is claimed first.
    with django_capture_on_commit_callbacks(execute=True):
        tasks.fire_cron_slot.apply(args=[job.pk], kwargs={"slot_at": "2026-12-05T02:00:00.105+00:00"})
        tasks.fire_cron_slot.apply(args=[job.pk], kwargs={"slot_at": "2026-12-05T02:00:03.870+00:00"})
    assert CronRun.objects.count() == 1
    assert hook_runs("cronJobFiring") == 1
    assert len(platform.calls_to("/missions")) == 1


def test_a_crontab_slot_is_its_minute_whichever_beat_sends_it(job):
    at = timezone.now().replace(hour=2, minute=0, second=0, microsecond=0)
    assert cron.slot_key(job, at + timedelta(seconds=1)) == cron.slot_key(job, at + timedelta(seconds=40))
    assert cron.slot_key(job, at + timedelta(seconds=61)) != cron.slot_key(job, at + timedelta(seconds=1))


EVERY = 3   # seconds: an interval job's period in the tests below
# An instant on a boundary of the epoch's 3 s buckets (the slots interval jobs had before the claim).
BOUNDARY = datetime(2026, 12, 5, 2, 0, 0, tzinfo=UTC)


@pytest.fixture
def every_3s(job, settings):
    """The job on a 3 s interval, its every slot cancelled by cronJobFiring (so none stays active and
    overlaps the next): each slot it fires is one cancelled run and one hook run."""
    settings.HUB_SCHEDULING = replace(settings.HUB_SCHEDULING, cron_min_interval_seconds=1)
    return cron.update_job(job.account, job.pk, cron_expression="", interval_seconds=EVERY, prompt="digest #hold")


def beat_sends(job, *offsets: float) -> list[str]:
    """Beat messages for `job`, sent at BOUNDARY + each offset (seconds), in that order; the statuses of
    the runs they left."""
    for offset in offsets:
        cron.fire_scheduled_slot(job.pk, (BOUNDARY + timedelta(seconds=offset)).isoformat())
    return [run.status for run in CronRun.objects.filter(job=job).order_by("slot_at", "id")]


def test_two_beats_sending_one_tick_across_a_bucket_boundary_fire_it_once(every_3s):
    # Both beats' ticks 2 ms apart, on either side of a boundary: epoch buckets called them two slots.
    assert beat_sends(every_3s, -0.001, 0.001) == ["cancelled"]
    assert hook_runs("cronJobFiring") == 1


def test_one_beat_whose_ticks_drift_across_a_bucket_boundary_fires_every_tick(every_3s):
    # Each tick a few ms late, as beat's are: however its phase drifts, a lone beat's every tick fires.
    assert beat_sends(every_3s, -0.004, 2.998, 6.0005, 9.003) == ["cancelled"] * 4
    assert hook_runs("cronJobFiring") == 4


def test_two_beats_out_of_phase_fire_once_an_interval(every_3s):
    # One beat ticks on the boundaries, the other 1.7 s after (past half a period): one run per period,
    # whichever beat's message the worker reads first (here the 7.7 s one before the 6 s one).
    statuses = beat_sends(every_3s, 0, 1.7, 3, 4.7, 7.7, 6, 9, 10.7)
    assert statuses == ["cancelled"] * 4
    assert hook_runs("cronJobFiring") == 4
    assert sorted(CronRun.objects.values_list("trigger_key", flat=True)) == sorted(
        f"slot:{every_3s.pk}:{EVERY}s:{(BOUNDARY + timedelta(seconds=s)).timestamp():.6f}" for s in (0, 3, 7.7, 10.7))


def test_the_same_interval_message_delivered_twice_fires_once(every_3s):
    assert beat_sends(every_3s, 0.25, 0.25) == ["cancelled"]
    assert hook_runs("cronJobFiring") == 1


def test_a_disabled_job_ignores_its_schedule_but_can_run_now(api_client, job, platform, eager,
                                                              django_capture_on_commit_callbacks):
    cron.update_job(job.account, job.pk, enabled=False)
    tasks.fire_cron_slot.apply(args=[job.pk], task_id="slot-1")
    assert not CronRun.objects.exists()
    assert run_now(api_client, job, django_capture_on_commit_callbacks)["status"] == "dispatching"


def test_a_slot_of_a_deleted_job_does_nothing(job, eager):
    job_id = job.pk
    job.delete()
    tasks.fire_cron_slot.apply(args=[job_id], task_id="slot-1")
    assert not CronRun.objects.exists()


def test_complete_fires_cron_job_completed_once_and_a_second_call_is_a_conflict(
        api_client, job, platform, eager, django_capture_on_commit_callbacks):
    run_id = run_now(api_client, job, django_capture_on_commit_callbacks)["id"]
    with django_capture_on_commit_callbacks(execute=True):
        first = api_client.post(f"/api/v1/cron-runs/{run_id}/complete", {"status": "completed"}, format="json")
    assert first.status_code == 200, first.json()
    assert first.json()["status"] == "completed"
    assert first.json()["durationSeconds"] >= 0
    assert hook_runs("cronJobCompleted") == 1
    with django_capture_on_commit_callbacks(execute=True):
        second = api_client.post(f"/api/v1/cron-runs/{run_id}/complete", {"status": "failed"}, format="json")
    assert second.status_code == 409
    assert second.json()["error"]["status"] == "completed"
    assert hook_runs("cronJobCompleted") == 1
    assert CronRun.objects.get(pk=int(run_id)).status == "completed"


def test_cron_job_completed_gets_the_run_the_session_and_the_status(api_client, job, platform, eager,
                                                                     django_capture_on_commit_callbacks):
    from plugins_app.services.execution.observers import after_chain

    seen = []
    after_chain.add("test", lambda run: seen.append((run.spec.name, run.result.context)))
    try:
        run_id = run_now(api_client, job, django_capture_on_commit_callbacks)["id"]
        session_id = CronRun.objects.get(pk=int(run_id)).session_id
        with django_capture_on_commit_callbacks(execute=True):
            api_client.post(f"/api/v1/cron-runs/{run_id}/complete", {"status": "timed_out"}, format="json")
    finally:
        after_chain.remove("test")
    [(_, context)] = [s for s in seen if s[0] == "cronJobCompleted"]
    assert context == {"cronJobId": str(job.pk), "cronJobRunId": run_id, "sessionId": session_id,
                       "agentId": "18446744073709551615", "status": "timed_out"}


def test_cron_job_completed_fires_at_most_once_even_if_its_task_runs_twice(api_client, job, platform, eager,
                                                                            django_capture_on_commit_callbacks):
    run_id = int(run_now(api_client, job, django_capture_on_commit_callbacks)["id"])
    with django_capture_on_commit_callbacks(execute=False):
        api_client.post(f"/api/v1/cron-runs/{run_id}/complete", {"status": "completed"}, format="json")
    assert cron.fire_completed(run_id) is True
    assert cron.fire_completed(run_id) is False
    assert hook_runs("cronJobCompleted") == 1


@pytest.mark.parametrize("body, field", [({"status": "done"}, "status"), ({}, "status"),
                                         ({"status": "completed", "sessionId": 5}, "sessionId")])
def test_a_bad_complete_changes_nothing(api_client, job, platform, eager, django_capture_on_commit_callbacks,
                                        body, field):
    run_id = run_now(api_client, job, django_capture_on_commit_callbacks)["id"]
    response = api_client.post(f"/api/v1/cron-runs/{run_id}/complete", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(field)
    assert CronRun.objects.get(pk=int(run_id)).status == "running"


def test_a_cancelled_or_skipped_run_cannot_be_completed(api_client, job, platform, eager,
                                                         django_capture_on_commit_callbacks):
    cron.update_job(job.account, job.pk, prompt="#hold")
    run_id = run_now(api_client, job, django_capture_on_commit_callbacks)["id"]
    response = api_client.post(f"/api/v1/cron-runs/{run_id}/complete", {"status": "completed"}, format="json")
    assert response.status_code == 409
    assert hook_runs("cronJobCompleted") == 0


def test_another_accounts_run_is_not_found(api_client, other_api_client, job, platform, eager,
                                           django_capture_on_commit_callbacks):
    run_id = run_now(api_client, job, django_capture_on_commit_callbacks)["id"]
    response = other_api_client.post(f"/api/v1/cron-runs/{run_id}/complete", {"status": "completed"}, format="json")
    assert response.status_code == 404
    assert other_api_client.get(f"/api/v1/cron-runs/{run_id}").status_code == 404
    assert CronRun.objects.get(pk=int(run_id)).status == "running"


def test_a_quick_mission_may_close_before_its_dispatch_is_recorded(account, job, api_client):
    run = cron.fire_slot(job.pk, trigger_key="k1")   # no platform call yet: still dispatching
    assert run.status == "dispatching"
    response = api_client.post(f"/api/v1/cron-runs/{run.pk}/complete", {"status": "completed"}, format="json")
    assert response.status_code == 400 and "sessionId" in response.json()["error"]["message"]
    response = api_client.post(f"/api/v1/cron-runs/{run.pk}/complete",
                               {"status": "completed", "sessionId": "77"}, format="json")
    assert response.status_code == 200
    run.refresh_from_db()
    assert (run.status, run.session_id) == ("completed", "77")
    assert cron.dispatch(run.pk).status == "completed"   # a late dispatch task changes nothing


def test_dispatch_is_retried_with_the_same_run_id_until_the_platform_accepts(job, platform, eager,
                                                                             django_capture_on_commit_callbacks):
    platform.fail("/missions", 503, 502)
    eager.conf.task_eager_propagates = False   # an eager retry re-raises Retry after running the retries
    with django_capture_on_commit_callbacks(execute=True):
        run = cron.fire_slot(job.pk, trigger_key="k1")
    attempts = [c for c in platform.calls if c["path"] == "/missions"]
    assert [c["status"] for c in attempts] == [503, 502, 200]
    assert {c["body"]["cronJobRunId"] for c in attempts} == {str(run.pk)}
    run.refresh_from_db()
    assert run.status == "running"


def test_dispatch_gives_up_after_its_retries_and_frees_the_job(job, platform, eager, monkeypatch,
                                                               django_capture_on_commit_callbacks):
    monkeypatch.setattr(tasks.dispatch_mission, "max_retries", 2)
    platform.fail("/missions", 503, 503, 503)
    eager.conf.task_eager_propagates = False
    with django_capture_on_commit_callbacks(execute=True):
        run = cron.fire_slot(job.pk, trigger_key="k1")
    run.refresh_from_db()
    assert run.status == "dispatch_failed"
    assert run.reason == "not dispatched: the platform could not be reached"
    assert len(platform.calls) == 3
    with django_capture_on_commit_callbacks(execute=True):
        assert cron.fire_slot(job.pk, trigger_key="k2").status == "dispatching"
    assert CronRun.objects.get(trigger_key="k2").status == "running"


def test_an_unconfigured_platform_fails_the_dispatch_at_once(job, eager, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = cron.fire_slot(job.pk, trigger_key="k1")
    run.refresh_from_db()
    assert run.status == "dispatch_failed"
    assert "not configured" in run.reason


def test_a_mission_is_never_dispatched_unsigned(job, platform, eager, django_capture_on_commit_callbacks):
    PlatformConfig.objects.filter(account=job.account).update(signing_secret="")   # saved before secrets were required
    with django_capture_on_commit_callbacks(execute=True):
        run = cron.fire_slot(job.pk, trigger_key="k1")
    run.refresh_from_db()
    assert run.status == "dispatch_failed" and "no signing secret" in run.reason
    assert platform.calls == []


def test_a_run_never_closed_expires_instead_of_blocking_the_job(job, settings):
    stale = cron.fire_slot(job.pk, trigger_key="k1")
    CronRun.objects.filter(pk=stale.pk).update(status="running", slot_at=timezone.now() - timedelta(days=2))
    fresh = cron.fire_slot(job.pk, trigger_key="k2")
    assert fresh.status == "dispatching"
    stale.refresh_from_db()
    assert stale.status == "expired"
    assert str(settings.HUB_SCHEDULING.cron_run_expiry_seconds) in stale.reason


def test_run_history_is_paginated_newest_first_and_filters_by_status(api_client, job):
    for i in range(3):
        run = cron.fire_slot(job.pk, trigger_key=f"k{i}")
        CronRun.objects.filter(pk=run.pk).update(status="completed", slot_at=timezone.now() + timedelta(minutes=i))
    cron.fire_slot(job.pk, trigger_key="k3")
    CronRun.objects.filter(trigger_key="k3").update(slot_at=timezone.now() + timedelta(hours=1))
    page = api_client.get(f"/api/v1/cron-jobs/{job.pk}/runs?pageSize=2").json()
    assert page["count"] == 4 and len(page["results"]) == 2 and page["next"]
    assert page["results"][0]["status"] == "dispatching"
    completed = api_client.get(f"/api/v1/cron-jobs/{job.pk}/runs?status=completed").json()
    assert completed["count"] == 3
    assert api_client.get(f"/api/v1/cron-jobs/{job.pk}/runs?status=nope").status_code == 400


def test_only_one_active_run_per_job_is_enforced_by_the_database(job):
    from django.db import IntegrityError, transaction

    cron.fire_slot(job.pk, trigger_key="k1")
    with pytest.raises(IntegrityError), transaction.atomic():
        CronRun.objects.create(account=job.account, job=job, trigger_key="k2", trigger="manual",
                               status="firing", slot_at=timezone.now())
    assert CronJob.objects.get(pk=job.pk).runs.count() == 1


def test_every_task_the_services_queue_by_name_is_registered():
    from middleware_hub.celery import app
    from plugins_app.services.scheduling import task_queue

    names = [value for key, value in vars(task_queue).items()
             if key.isupper() and isinstance(value, str) and value.startswith("plugins_app.tasks.")]
    assert len(names) == 8   # each task tasks.py defines
    assert all(name in app.tasks for name in names), sorted(set(names) - set(app.tasks))


def test_shadow_runs_cron_and_timers_each_have_a_queue_a_plain_worker_consumes():
    # Issue 29: one queue for everything let ~3,000 shadow runs delay a cron slot by 21 s.
    from middleware_hub.celery import app
    from plugins_app.services.scheduling import task_queue as q

    def queue_of(name):
        return app.amqp.router.route({}, name)["queue"].name

    assert {queue_of(q.RUN_SHADOW), queue_of(q.FIRE_CRON_SLOT), queue_of(q.DELIVER_NOTIFICATION)} == \
        {"shadow", "cron", "timers"}
    assert queue_of(q.DISPATCH_MISSION) == queue_of(q.FIRE_CRON_COMPLETED) == "cron"
    assert queue_of(q.DELIVER_DUE_NOTIFICATIONS) == "timers"
    # A worker given no -Q consumes every queue the app declares: each of the above, and the default.
    assert set(app.amqp.queues) == {"celery", "shadow", "cron", "timers"}
    # Each bound apart: a task routed to one queue is delivered to that one only.
    assert {(name, q.exchange.name, q.routing_key) for name, q in app.amqp.queues.items()} == \
        {(name, name, name) for name in app.amqp.queues}


def test_a_fresh_process_finds_the_tasks_it_queues_by_name():
    # A web process has not imported plugins_app.tasks when it first queues one (workers have).
    import subprocess
    import sys
    from pathlib import Path

    script = ("import django, sys; django.setup(); from plugins_app.services.scheduling import task_queue as q;"
              "assert 'plugins_app.tasks' not in sys.modules;"
              "print(q.task(q.RUN_SHADOW).name, q.task(q.DISPATCH_MISSION).name)")
    result = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[3],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["plugins_app.tasks.run_shadow", "plugins_app.tasks.dispatch_mission"]


SLOW_TASKS_IMPORT = """
import importlib.abc, importlib.machinery, sys, threading, time
import django
django.setup()
from plugins_app.services.scheduling import task_queue as q

class SlowTasks(importlib.abc.MetaPathFinder):
    # plugins_app.tasks is in sys.modules while its body runs: hold it there a while, as a busy
    # machine does, so a second thread sees it half-imported.
    def find_spec(self, name, path, target=None):
        if name != "plugins_app.tasks":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        real = spec.loader.exec_module
        def exec_module(module):
            time.sleep(0.3)
            real(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, SlowTasks())
ready, failures = threading.Barrier(8), []
def first_call():
    ready.wait()
    try:
        q.task(q.RUN_SHADOW)
    except Exception as exc:
        failures.append(type(exc).__name__)
threads = [threading.Thread(target=first_call) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print("failures:", len(failures), sorted(set(failures)))
"""


def test_concurrent_first_calls_of_a_fresh_process_all_find_the_task():
    # Issue 29: a fresh web worker's first enqueues, arriving together, lost shadow runs to NotRegistered.
    import os
    import subprocess
    import sys
    from pathlib import Path

    result = subprocess.run([sys.executable, "-c", SLOW_TASKS_IMPORT], cwd=Path(__file__).resolve().parents[3],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "DJANGO_SETTINGS_MODULE": "middleware_hub.settings"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "failures: 0 []"


def test_beats_scheduler_sends_each_slot_with_the_time_it_was_sent(monkeypatch):
    from django_celery_beat.schedulers import DatabaseScheduler

    from plugins_app.services.scheduling import beat

    class Entry:
        task, name, args, kwargs, options = "plugins_app.tasks.fire_cron_slot", "cron job 7", [7], {}, {}

    sent = []
    monkeypatch.setattr(DatabaseScheduler, "apply_async",
                        lambda self, entry, producer=None, advance=True, **kw: sent.append((entry, advance)))
    scheduler = beat.SlotScheduler.__new__(beat.SlotScheduler)   # its parts that sending uses only
    scheduler.apply_async(Entry(), advance=False)
    [(entry, advance)] = sent
    assert advance is False and entry.args == [7] and entry.task == Entry.task
    at = timezone.datetime.fromisoformat(entry.kwargs["slot_at"])
    assert abs((timezone.now() - at).total_seconds()) < 60 and Entry.kwargs == {}


@pytest.mark.django_db(transaction=True)
def test_copies_of_one_tick_claimed_at_once_from_many_workers_fire_once(account, settings):
    # Eight workers each read a copy (a beat's) of one tick at the same moment: one conditional UPDATE
    # of the job's row wins, on PostgreSQL (row lock, the condition read again) and SQLite (one writer).
    import threading

    from django.db import connection

    settings.HUB_SCHEDULING = replace(settings.HUB_SCHEDULING, cron_min_interval_seconds=1)
    job = cron.create_job(account, agent_id="7", name="digest", prompt="p", interval_seconds=EVERY)
    start, won = threading.Barrier(8), []

    def worker(n: int) -> None:
        start.wait()
        try:
            won.append(cron.claim_interval_slot(job, BOUNDARY + timedelta(milliseconds=n * 40)))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(won) == [False] * 7 + [True]
    # The next tick (an interval after the latest copy): a new slot.
    assert cron.claim_interval_slot(job, BOUNDARY + timedelta(seconds=EVERY, milliseconds=300)) is True

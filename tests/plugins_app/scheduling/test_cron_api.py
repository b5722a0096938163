"""The cron-jobs API: create, read, change, delete, and the beat schedule kept in step with each job."""

import json
from dataclasses import replace

import pytest
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from plugins_app.models import CronJob

pytestmark = pytest.mark.django_db

JOB = {"agentId": "18446744073709551615", "kind": "heartbeat", "name": "Morning check",
       "prompt": "Check the overnight alerts.", "schedule": {"crontab": "30 7 * * 1-5", "timezone": "Europe/Paris"}}


def create(client, **changes):
    response = client.post("/api/v1/cron-jobs", {**JOB, **changes}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_create_answers_the_job_with_string_ids_and_schedules_it(api_client):
    body = create(api_client)
    assert isinstance(body["id"], str)
    assert body["agentId"] == JOB["agentId"]
    assert body["schedule"] == {"crontab": "30 7 * * 1-5", "timezone": "Europe/Paris"}
    assert body["enabled"] is True
    job = CronJob.objects.get(pk=int(body["id"]))
    task = job.periodic_task
    assert task.task == "plugins_app.tasks.fire_cron_slot"
    assert json.loads(task.args) == [job.pk]
    assert task.enabled is True and task.interval is None
    assert (task.crontab.minute, task.crontab.hour, task.crontab.day_of_week) == ("30", "7", "1-5")
    assert str(task.crontab.timezone) == "Europe/Paris"


def test_an_interval_job_gets_an_interval_schedule(api_client, settings):
    settings.HUB_SCHEDULING = replace(settings.HUB_SCHEDULING, cron_min_interval_seconds=5)
    body = create(api_client, schedule={"intervalSeconds": 90})
    assert body["schedule"] == {"intervalSeconds": 90}
    task = CronJob.objects.get(pk=int(body["id"])).periodic_task
    assert task.crontab is None
    assert (task.interval.every, task.interval.period) == (90, "seconds")
    assert task.expire_seconds == 90


@pytest.mark.parametrize("changes, field", [
    ({"agentId": 18446744073709551615}, "agentId"),
    ({"agentId": ""}, "agentId"),
    ({"name": ""}, "name"),
    ({"prompt": "   "}, "prompt"),
    ({"kind": "weekly"}, "kind"),
    ({"enabled": "yes"}, "enabled"),
    ({"schedule": {"crontab": "61 * * * *"}}, "schedule.crontab"),
    ({"schedule": {"crontab": "* * * *"}}, "schedule.crontab"),
    ({"schedule": {"crontab": "0 9 * * *", "timezone": "Mars/Olympus"}}, "schedule.timezone"),
    ({"schedule": {"crontab": "0 9 * * *", "timezone": "Europe"}}, "schedule.timezone"),
    ({"schedule": {"intervalSeconds": 3600, "timezone": "Mars/Olympus"}}, "schedule.timezone"),
    ({"schedule": {"intervalSeconds": 10}}, "schedule.intervalSeconds"),
    ({"schedule": {"crontab": "0 9 * * *", "intervalSeconds": 3600}}, "schedule"),
    ({"schedule": {}}, "schedule"),
])
def test_bad_input_is_refused_naming_the_field_and_creates_nothing(api_client, changes, field):
    response = api_client.post("/api/v1/cron-jobs", {**JOB, **changes}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"].startswith(field.split(".")[0])
    assert field.split(".")[-1] in error["message"]
    assert not CronJob.objects.exists() and not PeriodicTask.objects.filter(task__contains="cron").exists()


def test_patch_changes_fields_and_moves_the_schedule(api_client, settings):
    settings.HUB_SCHEDULING = replace(settings.HUB_SCHEDULING, cron_min_interval_seconds=60)
    job_id = create(api_client)["id"]
    response = api_client.patch(f"/api/v1/cron-jobs/{job_id}", {"prompt": "New prompt",
                                                                 "schedule": {"intervalSeconds": 600}}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["prompt"] == "New prompt"
    assert response.json()["schedule"] == {"intervalSeconds": 600}
    assert response.json()["name"] == JOB["name"]
    task = CronJob.objects.get(pk=int(job_id)).periodic_task
    assert task.crontab is None and task.interval.every == 600
    assert PeriodicTask.objects.filter(task="plugins_app.tasks.fire_cron_slot").count() == 1


def test_disabling_a_job_disables_its_periodic_task_and_enabling_restores_it(api_client):
    job_id = create(api_client)["id"]
    api_client.patch(f"/api/v1/cron-jobs/{job_id}", {"enabled": False}, format="json")
    assert CronJob.objects.get(pk=int(job_id)).periodic_task.enabled is False
    api_client.patch(f"/api/v1/cron-jobs/{job_id}", {"enabled": True}, format="json")
    assert CronJob.objects.get(pk=int(job_id)).periodic_task.enabled is True


def test_a_bad_patch_changes_nothing(api_client):
    job_id = create(api_client)["id"]
    response = api_client.patch(f"/api/v1/cron-jobs/{job_id}", {"name": "Renamed",
                                                                 "schedule": {"crontab": "bogus"}}, format="json")
    assert response.status_code == 400
    job = CronJob.objects.get(pk=int(job_id))
    assert job.name == JOB["name"] and job.cron_expression == "30 7 * * 1-5"
    assert job.periodic_task.crontab.minute == "30"


def test_delete_removes_the_job_and_its_periodic_task(api_client):
    job_id = create(api_client)["id"]
    task_id = CronJob.objects.get(pk=int(job_id)).periodic_task_id
    assert api_client.delete(f"/api/v1/cron-jobs/{job_id}").status_code == 204
    assert not CronJob.objects.exists()
    assert not PeriodicTask.objects.filter(pk=task_id).exists()
    assert api_client.get(f"/api/v1/cron-jobs/{job_id}").status_code == 404


def test_deleting_the_account_removes_its_jobs_periodic_tasks(api_client, account):
    create(api_client)
    account.delete()
    assert not PeriodicTask.objects.filter(task="plugins_app.tasks.fire_cron_slot").exists()


def test_jobs_with_the_same_crontab_share_one_schedule_row(api_client):
    create(api_client)
    create(api_client, name="Second")
    assert CrontabSchedule.objects.filter(minute="30", hour="7").count() == 1


def test_list_is_paginated_and_scoped_to_the_account(api_client, other_api_client):
    create(api_client)
    create(other_api_client, name="Theirs")
    body = api_client.get("/api/v1/cron-jobs").json()
    assert body["count"] == 1
    assert [j["name"] for j in body["results"]] == [JOB["name"]]


def test_another_accounts_job_is_not_found(api_client, other_api_client):
    job_id = create(other_api_client)["id"]
    assert api_client.get(f"/api/v1/cron-jobs/{job_id}").status_code == 404
    assert api_client.patch(f"/api/v1/cron-jobs/{job_id}", {"name": "x"}, format="json").status_code == 404
    assert api_client.delete(f"/api/v1/cron-jobs/{job_id}").status_code == 404
    assert api_client.post(f"/api/v1/cron-jobs/{job_id}/run").status_code == 404
    assert api_client.get(f"/api/v1/cron-jobs/{job_id}/runs").status_code == 404
    assert CronJob.objects.get(pk=int(job_id)).name == JOB["name"]


def test_the_api_needs_a_key(client):
    assert client.get("/api/v1/cron-jobs").status_code == 401
    assert client.get("/api/v1/notifications").status_code == 401


def test_run_now_of_a_job_deleted_as_it_fires_is_not_found(api_client, monkeypatch):
    """The job is looked up, then deleted by another request before its slot is created: the
    caller gets the API's 404 rather than a 500 from serializing nothing."""
    from plugins_app.services.scheduling import cron

    job_id = create(api_client)["id"]
    looked_up = cron.get_job

    def then_deleted(account, job_id, *args, **kwargs):
        job = looked_up(account, job_id, *args, **kwargs)
        CronJob.objects.filter(pk=job.pk).delete()   # the other request's delete, landing in between
        return job

    monkeypatch.setattr(cron, "get_job", then_deleted)
    response = api_client.post(f"/api/v1/cron-jobs/{job_id}/run")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == f"cron job {job_id} was deleted"
    assert response.json()["error"]["code"] == "not_found"

"""The cron job, run history and timer admin pages, scoped by membership."""

import pytest
from django.urls import reverse

from accounts import services
from plugins_app.models import CronJob, CronRun
from plugins_app.services.scheduling import cron, notifications

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-test-password"
MANAGEMENT = {"runs-TOTAL_FORMS": "0", "runs-INITIAL_FORMS": "0", "runs-MIN_NUM_FORMS": "0",
              "runs-MAX_NUM_FORMS": "1000"}


@pytest.fixture
def login(client):
    def do(account_name, username, role):
        services.add_member(account_name, username, role, password=PASSWORD)
        assert client.login(username=username, password=PASSWORD)
        return client
    return do


def make_job(account, **changes):
    fields = {"agent_id": "7", "name": "Nightly report", "prompt": "Write it.", "cron_expression": "0 2 * * *"}
    return cron.create_job(account, **{**fields, **changes})


def form(account, **changes):
    data = {"account": account.pk, "name": "From the admin", "agent_id": "7", "kind": "cron_job",
            "prompt": "Check the queue.", "cron_expression": "*/15 * * * *", "timezone": "UTC",
            "interval_seconds": "", "enabled": "on", **MANAGEMENT}
    data.update(changes)
    return data


def test_an_account_admin_creates_a_job_and_its_schedule(login, account):
    client = login(account.name, "alice", "admin")
    response = client.post(reverse("admin:plugins_app_cronjob_add"), form(account))
    assert response.status_code == 302, response.content.decode()[:2000]
    job = CronJob.objects.get(name="From the admin")
    assert job.periodic_task.crontab.minute == "*/15"
    assert job.periodic_task.enabled is True


@pytest.mark.parametrize("changes, message", [
    ({"cron_expression": "*/15 * *"}, "five fields"),
    ({"cron_expression": "0 9 * * *", "interval_seconds": "3600"}, "not both"),
    ({"cron_expression": "", "interval_seconds": ""}, "either a crontab or an interval"),
    ({"timezone": "Nowhere/Special"}, "unknown time zone"),
    ({"agent_id": ""}, "This field is required"),
])
def test_a_bad_form_shows_the_error_and_creates_nothing(login, account, changes, message):
    client = login(account.name, "alice", "admin")
    response = client.post(reverse("admin:plugins_app_cronjob_add"), form(account, **changes))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not CronJob.objects.exists()


def test_disabling_in_the_admin_disables_the_beat_entry(login, account):
    job = make_job(account)
    client = login(account.name, "alice", "admin")
    data = form(account, name=job.name, cron_expression=job.cron_expression)
    del data["enabled"]
    del data["account"]
    response = client.post(reverse("admin:plugins_app_cronjob_change", args=[job.pk]), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    job.refresh_from_db()
    assert job.enabled is False and job.periodic_task.enabled is False


def test_the_change_page_shows_recent_runs_and_links_the_history(login, account):
    job = make_job(account)
    run = cron.fire_slot(job.pk, trigger_key="k1")
    CronRun.objects.filter(pk=run.pk).update(status="cancelled", reason="held for the freeze")
    client = login(account.name, "alice", "admin")
    page = client.get(reverse("admin:plugins_app_cronjob_change", args=[job.pk])).content.decode()
    assert "held for the freeze" in page
    assert f"?job__id__exact={job.pk}" in page
    history = client.get(reverse("admin:plugins_app_cronrun_changelist"), {"job__id__exact": job.pk})
    assert "held for the freeze" in history.content.decode()


def test_run_now_action_fires_a_slot(login, account):
    job = make_job(account)
    client = login(account.name, "alice", "admin")
    response = client.post(reverse("admin:plugins_app_cronjob_changelist"),
                           {"action": "run_now", "_selected_action": [job.pk]}, follow=True)
    assert "dispatching" in response.content.decode()
    assert CronRun.objects.get(job=job).trigger == "manual"


def test_other_accounts_jobs_runs_and_timers_are_invisible(login, account, other_account):
    theirs = make_job(other_account, name="Their job")
    notifications.schedule(other_account, session_id="1", message="their timer", delay_seconds=60)
    client = login(account.name, "alice", "admin")
    assert "Their job" not in client.get(reverse("admin:plugins_app_cronjob_changelist")).content.decode()
    assert client.get(reverse("admin:plugins_app_cronjob_change", args=[theirs.pk])).status_code == 404
    assert "their timer" not in client.get(reverse("admin:plugins_app_notification_changelist")).content.decode()
    response = client.post(reverse("admin:plugins_app_cronjob_add"), form(other_account))
    assert response.status_code == 200
    assert not CronJob.objects.filter(name="From the admin").exists()


def test_an_auditor_views_but_cannot_change(login, account):
    job = make_job(account)
    notifications.schedule(account, session_id="1", message="my timer", delay_seconds=60)
    client = login(account.name, "audrey", "auditor")
    assert job.name in client.get(reverse("admin:plugins_app_cronjob_changelist")).content.decode()
    assert "my timer" in client.get(reverse("admin:plugins_app_notification_changelist")).content.decode()
    assert client.get(reverse("admin:plugins_app_cronjob_add")).status_code == 403
    response = client.post(reverse("admin:plugins_app_cronjob_change", args=[job.pk]), form(account, name="x"))
    assert response.status_code == 403
    job.refresh_from_db()
    assert job.name == "Nightly report"

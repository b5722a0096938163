"""Every action of every registered ModelAdmin checks each selected row against that row's account."""

import itertools
from datetime import timedelta

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule, PeriodicTask, SolarSchedule

from accounts import services
from accounts.models import Account, ApiKey, Membership
from plugins_app.models import Agent, CronJob, Installation, KvEntry, PlatformConfig, Secret, SshHost, WorkspaceFile
from plugins_app.services.scheduling import cron
from plugins_app.services.secrets import store as secret_store

from ..execution.test_quarantine import make_installation, strike

pytestmark = pytest.mark.django_db

_names = itertools.count()


def _name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def _interval(_account):
    return IntervalSchedule.objects.create(every=next(_names) + 10, period=IntervalSchedule.SECONDS)


# A row of each model that has actions: in `account` for account-scoped models, global otherwise.
# A model that gains its first action needs a builder here, or the test fails saying so.
BUILDERS = {
    Account: lambda account: account,
    ApiKey: lambda account: ApiKey.issue(account, name="key")[0],
    Membership: lambda account: Membership.objects.get(
        account=account, user=services.add_member(account.name, _name("bystander"), "auditor")[0]),
    get_user_model(): lambda _account: get_user_model().objects.create_user(_name("someone"), is_staff=True),
    Group: lambda _account: Group.objects.create(name=_name("group")),
    PlatformConfig: lambda account: PlatformConfig.objects.create(
        account=account, base_url="http://127.0.0.1:9/hub", signing_secret="s"),
    Agent: lambda account: Agent.objects.create(account=account, agent_id="7", name="Scout"),
    WorkspaceFile: lambda account: WorkspaceFile.objects.create(account=account, agent_id="7", path="notes.md",
                                                                content="hi", size=2),
    Installation: lambda account: make_installation(account, _name("Plugin")),
    KvEntry: lambda account: KvEntry.objects.create(
        account=account, installation=make_installation(account, _name("Plugin")), key="k", value='"v"', size=4,
        updated_at=timezone.now()),
    CronJob: lambda account: cron.create_job(account, agent_id="7", name=_name("Job"), prompt="Report.",
                                             cron_expression="0 2 * * *"),
    Secret: lambda account: secret_store.set_secret(account, _name("TOKEN").replace("-", "_"),
                                                    value="value-0123456789", allowed_hosts=["a.example.com"])[0],
    SshHost: lambda account: SshHost.objects.create(
        account=account, display_name="box", hostname="127.0.0.1", port=22, username="hub",
        private_key_encrypted=b"x", public_key="ssh-ed25519 AAAA", host_key="ssh-ed25519 AAAA",
        host_key_fingerprint="SHA256:x"),
    PeriodicTask: lambda account: PeriodicTask.objects.create(name=_name("task"), task="noop",
                                                              interval=_interval(account)),
    IntervalSchedule: _interval,
    CrontabSchedule: lambda _account: CrontabSchedule.objects.create(minute=str(next(_names) % 60)),
    SolarSchedule: lambda _account: SolarSchedule.objects.create(event="sunrise", latitude=1, longitude=next(_names)),
    ClockedSchedule: lambda _account: ClockedSchedule.objects.create(
        clocked_time=timezone.now() + timedelta(days=1, seconds=next(_names))),
}


def _disable(installation):
    Installation.objects.filter(pk=installation.pk).update(enabled=False)


# The state a row needs for the action to have something to do.
PREPARE = {
    (Installation, "enable_selected"): _disable,
    (Installation, "release_selected"): lambda installation: strike(installation, 3),
}


def _operator_request():
    request = RequestFactory().get("/")
    request.user = get_user_model()(username="root", is_staff=True, is_superuser=True, is_active=True)
    return request


def registered_actions() -> list:
    request = _operator_request()
    return [pytest.param(model, name, id=f"{model._meta.label}:{name}")
            for model, model_admin in admin.site._registry.items() for name in model_admin.get_actions(request)]


def snapshot() -> dict:
    """Every row of every table (but sessions, which a request writes to)."""
    state = {}
    for model in apps.get_models():
        if model._meta.label == "sessions.Session":
            continue
        rows = model.objects.order_by("pk").values()
        state[model._meta.label] = [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()}
                                    for row in rows]
    return state


def build(model, account):
    assert model in BUILDERS, f"{model._meta.label} has admin actions: add a builder to BUILDERS"
    return BUILDERS[model](account)


def post_action(client, model, action, obj):
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    # "post" confirms delete_selected at once; other actions ignore it.
    return client.post(url, {"action": action, ACTION_CHECKBOX_NAME: [obj.pk], "post": "yes"}, follow=True)


def offered(client, model, action) -> bool:
    """Whether the changelist offers the action (it lists actions only when it shows rows)."""
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    response = client.get(url)
    return response.status_code == 200 and f'<option value="{action}"' in response.content.decode()


@pytest.fixture
def mixed(login, account, other_account):
    """Administers acme, only audits globex."""
    services.add_member(other_account.name, "mixed", "auditor")
    return login(account.name, "mixed", "admin")


@pytest.mark.parametrize("model, action", registered_actions())
def test_an_action_changes_nothing_in_an_account_the_user_only_audits(mixed, account, other_account, model, action):
    theirs = build(model, other_account)
    PREPARE.get((model, action), lambda obj: None)(theirs)
    before = snapshot()
    post_action(mixed, model, action, theirs)
    assert snapshot() == before

    # The same user, where they are an admin: the actions offered to them work on their own rows.
    mine = build(model, account)
    PREPARE.get((model, action), lambda obj: None)(mine)
    if offered(mixed, model, action):
        before = snapshot()
        post_action(mixed, model, action, mine)
        assert snapshot() != before, f"{action} did nothing to a row of an account the user administers"


def test_account_admins_are_offered_the_actions_meant_for_them(mixed, account):
    # Keeps the second half of the test above from passing by never running.
    for model, action in [(CronJob, "run_now"), (ApiKey, "revoke_selected"), (Installation, "enable_selected"),
                          (Installation, "disable_selected"), (Installation, "release_selected"),
                          (Agent, "delete_selected")]:
        build(model, account)
        assert offered(mixed, model, action), (model, action)


def test_a_selection_spanning_both_accounts_acts_only_on_the_administered_row(mixed, account, other_account):
    mine, theirs = build(CronJob, account), build(CronJob, other_account)
    url = reverse("admin:plugins_app_cronjob_changelist")
    response = mixed.post(url, {"action": "run_now", ACTION_CHECKBOX_NAME: [mine.pk, theirs.pk]}, follow=True)
    assert list(mine.runs.values_list("trigger", flat=True)) == ["manual"]
    assert not theirs.runs.exists()
    assert "Refused 1 cron job(s)" in response.content.decode()

"""Recorded calls (issue 43): each live execute call is kept as received, with the versions that ran and the
outcome; bounded per account and hook in count and age, redacted, visible to auditors, gone with the account."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from accounts.models import Account
from plugins_app.models import RecordedCall
from plugins_app.services.secrets.store import set_secret
from plugins_app.services.versions import recording
from plugins_app.services.versions.config import RecordingConfig

from ..conftest import PROMPT, appender
from .test_shadow_api import execute

pytestmark = pytest.mark.django_db

INBOUND = {"sessionId": "10", "channelId": None, "mediaIds": []}
VETO = ("globalThis.middleware.userMessageInbound = async (c, t) => "
        "c.text.startsWith('rm') ? t.cancel('no rm') : c.text + '!';")
TOKEN = "tok-7f3a9c21-very-secret"


def listed(client, query=""):
    response = client.get(f"/api/v1/recorded-calls{query}")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_live_call_is_recorded_as_received_with_versions_and_outcome(api_client, install):
    plugin = install(appender("-a"))
    execute(api_client, PROMPT, "systemPrompt")
    [call] = listed(api_client)["results"]
    assert call["hook"] == "systemPrompt" and call["context"]["systemPrompt"] == "base"   # before the chain
    assert call["versions"] == {str(plugin.pk): 1}
    assert (call["outcome"], call["value"], call["cancelledBy"]) == ("changed", "base-a", "")


def test_cancels_are_recorded_and_the_list_filters(api_client, install):
    install(VETO, name="veto")
    execute(api_client, dict(INBOUND, text="rm -rf /"))
    execute(api_client, dict(INBOUND, text="ls"))
    cancelled = listed(api_client, "?outcome=cancelled")["results"]
    assert [(c["context"]["text"], c["cancelledBy"], c["reason"]) for c in cancelled] == [("rm -rf /", "veto", "no rm")]
    assert listed(api_client, "?hook=userMessageInbound")["count"] == 2
    assert listed(api_client, "?hook=systemPrompt")["count"] == 0
    bad = api_client.get("/api/v1/recorded-calls?outcome=maybe")
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "outcome"


def test_the_count_bound_keeps_the_newest_per_hook(api_client, install, settings):
    settings.HUB_RECORDING = RecordingConfig(per_hook=3, days=7)
    install(appender("-a"))
    for n in range(5):
        execute(api_client, dict(PROMPT, systemPrompt=f"p{n}"), "systemPrompt")
    execute(api_client, dict(INBOUND, text="hi"))
    kept = RecordedCall.objects.filter(hook="systemPrompt").order_by("created_at", "id")
    assert [c.context["systemPrompt"] for c in kept] == ["p2", "p3", "p4"]
    assert RecordedCall.objects.filter(hook="userMessageInbound").count() == 1   # another hook, its own bound


def test_calls_past_the_age_bound_are_dropped_and_never_listed(api_client, account, install, settings):
    settings.HUB_RECORDING = RecordingConfig(per_hook=100, days=7)
    old = RecordedCall.objects.create(account=account, hook="systemPrompt", context=PROMPT, outcome="unchanged",
                                      created_at=timezone.now() - timedelta(days=8))
    assert listed(api_client)["count"] == 0   # past the bound: not shown even before it is pruned
    execute(api_client, PROMPT, "systemPrompt")
    assert not RecordedCall.objects.filter(pk=old.pk).exists()
    assert listed(api_client)["count"] == 1


def test_zero_records_nothing(api_client, install, settings):
    settings.HUB_RECORDING = RecordingConfig(per_hook=0, days=7)
    install(appender("-a"))
    execute(api_client, PROMPT, "systemPrompt")
    assert RecordedCall.objects.count() == 0


def test_a_secret_sent_in_a_context_is_never_stored(api_client, account, install):
    set_secret(account, "API_TOKEN", value=TOKEN, allowed_hosts=["api.example.com"])
    install(VETO, name="veto")   # granted no secret: the recording redacts every secret of the account
    execute(api_client, dict(INBOUND, text=f"my token is {TOKEN}"))
    execute(api_client, dict(INBOUND, text=f"rm {TOKEN}"))
    calls = listed(api_client)["results"]
    assert [c["context"]["text"] for c in calls] == ["rm [secret API_TOKEN]", "my token is [secret API_TOKEN]"]
    assert calls[1]["value"] == "my token is [secret API_TOKEN]!"
    with connection.cursor() as cursor:   # nowhere in the table, in any column
        cursor.execute(f"SELECT * FROM {RecordedCall._meta.db_table}")
        stored = json.dumps([list(map(str, row)) for row in cursor.fetchall()])
    assert TOKEN not in stored and "API_TOKEN" in stored


def test_a_failed_write_keeps_the_calls_for_the_next_flush(account):
    calls = [{"account_id": account.pk, "hook": "systemPrompt", "context": PROMPT, "hop": 0, "turn_id": "",
              "versions": {}, "outcome": "unchanged", "value": "base", "cancelled_by": "", "reason": "",
              "created_at": timezone.now()},
             {"account_id": account.pk, "hook": "systemPrompt", "context": {"x": {1, 2}}, "hop": 0, "turn_id": "",
              "versions": {}, "outcome": "unchanged", "value": "base", "cancelled_by": "", "reason": "",
              "created_at": timezone.now()}]
    writer = recording.Recorder()
    with writer._lock:
        writer._pending.update(enumerate(calls))
    writer.flush()
    # The good call is written; the one that cannot be is kept for the next flush, not dropped.
    assert RecordedCall.objects.filter(account=account).count() == 1
    assert [c["context"] for c in writer._pending.values()] == [{"x": {1, 2}}]   # not JSON: it cannot be written
    writer.flush()
    assert RecordedCall.objects.filter(account=account).count() == 1   # written once, not again
    for _ in range(recording.MAX_TRIES):   # one the database can never take is let go in the end
        writer.flush()
    assert writer._pending == {}


def test_auditors_of_another_account_see_nothing_and_deleting_the_account_deletes_them(
        api_client, other_api_client, account, other_account, install):
    install(appender("-a"))
    execute(api_client, PROMPT, "systemPrompt")
    call = RecordedCall.objects.get()
    assert listed(other_api_client)["count"] == 0
    assert other_api_client.post(f"/api/v1/recorded-calls/{call.pk}/replay", {}, format="json").status_code == 404
    RecordedCall.objects.create(account=other_account, hook="systemPrompt", context=PROMPT, outcome="unchanged",
                                created_at=timezone.now())
    Account.objects.filter(pk=account.pk).delete()   # it has an installation: its calls go with it
    assert list(RecordedCall.objects.values_list("account_id", flat=True)) == [other_account.pk]


def test_a_recorded_call_replays_against_the_chain_as_it_is_now(api_client, install):
    install(appender("-a"))
    execute(api_client, PROMPT, "systemPrompt")
    call = RecordedCall.objects.get()
    install(appender("-b"))
    response = api_client.post(f"/api/v1/recorded-calls/{call.pk}/replay", {}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["recorded"]["value"], body["replayed"]["value"], body["sameOutcome"]) == ("base-a", "base-a-b", False)
    assert RecordedCall.objects.count() == 1   # a replay is not recorded


def test_beat_prunes_calls_past_the_age_bound_in_accounts_that_stopped_calling(account, other_account, settings):
    from middleware_hub.celery import app
    from plugins_app import tasks
    from plugins_app.services.scheduling.task_queue import PRUNE_RECORDED_CALLS, ROUTES

    assert [e["task"] for e in app.conf.beat_schedule.values()].count(PRUNE_RECORDED_CALLS) == 1
    assert PRUNE_RECORDED_CALLS in app.tasks and ROUTES[PRUNE_RECORDED_CALLS] == "timers"
    settings.HUB_RECORDING = RecordingConfig(per_hook=100, days=7)
    now = timezone.now()
    rows = {(who.pk, age): RecordedCall.objects.create(account=who, hook="systemPrompt", context=PROMPT,
                                                       outcome="unchanged", created_at=now - timedelta(days=age))
            for who in (account, other_account) for age in (1, 8)}
    assert tasks.prune_recorded_calls() == 2
    assert set(RecordedCall.objects.values_list("pk", flat=True)) == {rows[account.pk, 1].pk, rows[other_account.pk, 1].pk}

"""Checking a version against recorded calls (issue 43): at its place, on the inputs that place saw, beside
the live code, writing nothing; the deploy guard; bad input; other accounts' ids."""

from datetime import timedelta

import pytest
from django.utils import timezone

from plugins_app.models import AccountChange, CancelLog, HandlerWarning, Installation, RecordedCall, UsageDaily
from plugins_app.services.versions import releases as versions

from .test_shadow_in_place import GUARD, GUARD_V2, TRIM

pytestmark = pytest.mark.django_db

INBOUND = {"sessionId": "10", "channelId": None, "mediaIds": []}
# 200 calls: 150 same, 30 different, 10 would now cancel, 6 would no longer cancel, 4 failed.
MIX = [" hello "] * 150 + ["xyz"] * 30 + ["my secret"] * 10 + ["rm -rf /"] * 6 + ["boom"] * 4


def record(account, texts, hook="userMessageInbound"):
    start = timezone.now() - timedelta(minutes=len(texts))
    RecordedCall.objects.bulk_create([
        RecordedCall(account=account, hook=hook, context=dict(INBOUND, text=text), outcome="unchanged",
                     created_at=start + timedelta(seconds=n)) for n, text in enumerate(texts)])


@pytest.fixture
def guard(account, install):
    install(TRIM, name="trim")
    guard = install(GUARD, name="guard")
    versions.create_draft(account, guard.pk, source=GUARD_V2, language="javascript")
    return guard


def check(client, installation, **body):
    return client.post(f"/api/v1/plugins/{installation.pk}/check", body, format="json")


def test_a_check_on_200_recorded_calls_counts_each_kind_and_writes_nothing(api_client, account, guard):
    record(account, MIX)
    response = check(api_client, guard, version=2, calls=200)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["calls"] == 200 and body["skipped"] == 0
    assert body["counts"] == {"same": 150, "different": 30, "wouldCancel": 10, "wouldNoLongerCancel": 6, "failed": 4}
    assert body["summary"] == ("200 recorded calls: 150 same, 30 different, 10 would now cancel, "
                               "6 would no longer cancel, 4 failed")
    assert body["differentPercent"] == 25.0
    assert len(body["examples"]["same"]) == 20 and len(body["examples"]["failed"]) == 4
    different = body["examples"]["different"][0]
    assert (different["input"], different["live"]["value"], different["candidate"]["value"]) == ("xyz", "xyz", "XYZ")
    assert body["examples"]["same"][0]["input"] == "hello"   # at its place: after the live 'trim'
    # Nothing written but the metering, kept apart from live runs.
    assert CancelLog.objects.count() == 0 and HandlerWarning.objects.count() == 0
    assert dict(UsageDaily.objects.values_list("plugin_slug", "runs")) == {"guard:check": 200}
    assert RecordedCall.objects.count() == 200   # a check's runs are not recorded calls
    assert Installation.objects.get(pk=guard.pk).live_version == 1


def test_a_check_takes_the_newest_calls(api_client, account, guard):
    record(account, ["xyz"] * 5 + ["hi"] * 3)
    body = check(api_client, guard, version=2, calls=3).json()
    assert body["counts"]["same"] == 3 and body["calls"] == 3


def test_the_live_version_checks_the_same_as_itself(api_client, account, guard):
    record(account, MIX[::10])
    body = check(api_client, guard, version=1).json()
    assert body["counts"]["same"] == body["calls"] == 20


def test_the_deploy_guard_refuses_past_the_limit_and_deploys_within_it(api_client, account, guard):
    record(account, MIX)
    url = f"/api/v1/plugins/{guard.pk}/versions/2/deploy"
    refused = api_client.post(url, {"check": 200, "maxDifferent": 10}, format="json")
    assert refused.status_code == 409, refused.content
    error = refused.json()["error"]
    assert error["code"] == "check_failed" and "25.0% not the same" in error["message"]
    assert error["check"]["counts"]["different"] == 30
    assert Installation.objects.get(pk=guard.pk).live_version == 1
    assert not AccountChange.objects.filter(action=AccountChange.Action.DEPLOY).exists()
    deployed = api_client.post(url, {"check": 200, "maxDifferent": 30}, format="json")
    assert deployed.status_code == 200, deployed.content
    assert deployed.json()["check"]["calls"] == 200 and deployed.json()["plugin"]["liveVersion"] == 2


@pytest.mark.parametrize("body, field", [
    ({"version": 2, "calls": 0}, "calls"), ({"version": 2, "calls": 1001}, "calls"),
    ({"version": 2, "calls": "many"}, "calls"), ({"version": 2, "calls": True}, "calls"),
    ({"version": [2]}, "version"), ({"calls": 5}, "version"), ({"version": 2, "extra": 1}, "extra")])
def test_bad_input_is_400_naming_the_field(api_client, account, guard, body, field):
    response = check(api_client, guard, **body)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == field


def test_bad_deploy_guards_are_400_and_deploy_nothing(api_client, guard):
    url = f"/api/v1/plugins/{guard.pk}/versions/2/deploy"
    for body, field in [({"maxDifferent": 101}, "maxDifferent"), ({"maxDifferent": "x"}, "maxDifferent"),
                        ({"check": 0}, "calls")]:
        response = api_client.post(url, body, format="json")
        assert response.status_code == 400 and response.json()["error"]["field"] == field, response.content
    assert Installation.objects.get(pk=guard.pk).live_version == 1


def test_unknown_versions_and_other_accounts_ids_are_404(api_client, other_api_client, account, guard):
    record(account, ["hi"])
    assert check(api_client, guard, version=9).status_code == 404
    assert check(other_api_client, guard, version=2).status_code == 404
    assert check(api_client, Installation(pk=10**9), version=1).status_code == 404
    refused = other_api_client.post(f"/api/v1/plugins/{guard.pk}/versions/2/deploy", {"check": 5}, format="json")
    assert refused.status_code == 404
    assert other_api_client.get("/api/v1/recorded-calls").json()["count"] == 0

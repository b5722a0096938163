"""GET /api/v1/changes: installs, enabling, grants, reorders, settings, releases and uninstalls are
recorded with who, when, what, before and after; filters; another account's changes stay hidden."""

import pytest
from django.utils import timezone

from plugins_app.models import AccountChange, Installation
from plugins_app.services.execution import quarantine

from ..catalog_support import install_official
from ..conftest import appender

pytestmark = pytest.mark.django_db

FETCHER = "globalThis.middleware.systemPrompt = async (c) => (await host.fetch('http://127.0.0.1:9/')).status + '';"


def changes(client, **params):
    response = client.get("/api/v1/changes", params)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_every_kind_of_change_is_recorded_with_before_and_after(api_client, install, account, synced):
    first = install(appender("-a"), name="first")
    second = install(FETCHER, name="second")
    api_client.patch(f"/api/v1/plugins/{first.pk}", {"enabled": False}, format="json")
    api_client.post(f"/api/v1/plugins/{second.pk}/grant", {"grant": ["host:fetch"]}, format="json")
    api_client.put("/api/v1/chains/systemPrompt", {"order": [str(second.pk), str(first.pk)]}, format="json")
    window = install_official(api_client, "maintenance-window", {"start": "22:00", "end": "06:00"})
    api_client.patch(f"/api/v1/plugins/{window['id']}/settings", {"settings": {"start": "23:00"}}, format="json")
    quarantine.record_misbehaviour(account.pk, second.pk, "timeout", "slow")
    api_client.post(f"/api/v1/plugins/{second.pk}/release")
    api_client.delete(f"/api/v1/plugins/{first.pk}")

    rows = changes(api_client)
    assert [r["action"] for r in rows] == ["uninstall", "release", "settings", "install", "reorder", "grant",
                                           "disable", "install", "install"]
    # The first two were installed by calling the service directly, as a management command would.
    assert {r["actor"] for r in rows[:-2]} == {"API key tests"} and {r["actor"] for r in rows[-2:]} == {"system"}
    by_action = {r["action"]: r for r in rows}
    assert (by_action["disable"]["before"], by_action["disable"]["after"]) == ({"enabled": True}, {"enabled": False})
    assert (by_action["grant"]["before"], by_action["grant"]["after"]) == ({"granted": []}, {"granted": ["host:fetch"]})
    assert by_action["reorder"]["before"] == {"hook": "systemPrompt", "order": ["first", "second"]}
    assert by_action["reorder"]["after"] == {"hook": "systemPrompt", "order": ["second", "first"]}
    assert by_action["settings"]["before"]["settings"]["start"] == "22:00"
    assert by_action["settings"]["after"]["settings"]["start"] == "23:00"
    assert by_action["release"]["before"]["slowLane"] is True and by_action["release"]["after"]["slowLane"] is False
    assert by_action["uninstall"]["plugin"] == "first" and by_action["uninstall"]["installationId"] is None
    assert rows[-1]["after"]["version"] == 1 and rows[-1]["plugin"] == "first"


def test_no_change_no_row(api_client, install):
    plugin = install(appender("-a"))
    count = AccountChange.objects.count()
    api_client.patch(f"/api/v1/plugins/{plugin.pk}", {"enabled": True}, format="json")
    api_client.post(f"/api/v1/plugins/{plugin.pk}/release")
    api_client.put("/api/v1/chains/systemPrompt", {"order": [str(plugin.pk)]}, format="json")
    assert AccountChange.objects.count() == count


def test_filters(api_client, install):
    first, second = install(appender("-a"), name="first"), install(appender("-b"), name="second")
    api_client.patch(f"/api/v1/plugins/{first.pk}", {"enabled": False}, format="json")
    api_client.patch(f"/api/v1/plugins/{second.pk}", {"enabled": False}, format="json")
    assert [r["plugin"] for r in changes(api_client, action="disable")] == ["second", "first"]
    assert [r["action"] for r in changes(api_client, plugin="first")] == ["disable", "install"]
    assert [r["action"] for r in changes(api_client, installationId=str(second.pk))] == ["disable", "install"]
    assert [r["action"] for r in changes(api_client, actor="API key tests")] == ["disable", "disable"]
    assert [r["action"] for r in changes(api_client, actor="system")] == ["install", "install"]
    assert changes(api_client, actor="bob") == []
    tomorrow = (timezone.localdate() + timezone.timedelta(days=1)).isoformat()
    assert changes(api_client, since=tomorrow) == [] and len(changes(api_client, until=tomorrow)) == 4
    page = api_client.get("/api/v1/changes", {"pageSize": 1}).json()
    assert page["count"] == 4 and len(page["results"]) == 1 and page["next"]


@pytest.mark.parametrize("params, field", [({"action": "explode"}, "action"), ({"since": "yesterday"}, "since"),
                                           ({"installationId": "x1"}, "installationId")])
def test_bad_filters_are_400_naming_the_parameter(api_client, params, field):
    response = api_client.get("/api/v1/changes", params)
    assert response.status_code == 400 and response.json()["error"]["field"] == field


def test_another_accounts_changes_are_not_listed(api_client, other_api_client, install, other_account):
    install(appender("-a"), name="mine")
    install(appender("-x"), name="theirs", target=other_account)
    assert [r["plugin"] for r in changes(api_client)] == ["mine"]
    assert [r["plugin"] for r in changes(other_api_client)] == ["theirs"]
    assert Installation.objects.count() == 2


def test_the_change_log_is_immutable(api_client, install):
    install(appender("-a"))
    row = AccountChange.objects.get()
    row.summary = "rewritten"
    with pytest.raises(Exception, match="cannot be changed"):
        row.save()
    with pytest.raises(Exception, match="cannot be deleted"):
        row.delete()

"""Shadow mode through the API: a shadowed veto never blocks, its vetoes, changes and failures are counted
with examples, the run is queued for a worker instead of made in the request, metering keeps shadow runs
apart, and promotion makes it live in one call."""

import pytest

from middleware_hub.celery import app
from plugins_app.models import AccountChange, CancelLog, HandlerWarning, Installation, UsageDaily, WorkspaceFile
from plugins_app.services.versions import releases as versions

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

INBOUND = {"sessionId": "10", "channelId": None, "text": "rm -rf /", "mediaIds": []}
VETO = ("globalThis.middleware.userMessageInbound = async (c, t) => "
        "c.text.startsWith('rm') ? t.cancel('no rm: ' + c.text) : c.text;")
SHOUT = "globalThis.middleware.userMessageInbound = async (c) => c.text.toUpperCase();"


def execute(client, context=INBOUND, hook="userMessageInbound"):
    response = client.post(f"/api/v1/hooks/{hook}/execute", {"context": context}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def set_mode(client, installation, **body):
    return client.patch(f"/api/v1/plugins/{installation.pk}", body, format="json")


def report(client, installation):
    response = client.get(f"/api/v1/plugins/{installation.pk}/shadow")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_shadowed_veto_never_blocks_and_is_counted_with_its_reason(api_client, install, account, eager):
    veto = install(VETO, name="guard")
    response = set_mode(api_client, veto, mode="shadow")
    assert response.status_code == 200 and response.json()["mode"] == "shadow"
    body = execute(api_client)
    assert body["outcome"] == "unchanged" and body["trace"] == []   # not in the live chain
    execute(api_client, dict(INBOUND, text="ls"))
    assert CancelLog.objects.count() == 0
    shadow = report(api_client, veto)
    assert shadow["counts"] == {"calls": 2, "same": 1, "different": 0, "wouldCancel": 1, "wouldNoLongerCancel": 0,
                                "failed": 0, "wouldChange": 0}
    assert [(e["reason"], e["version"], e["hook"]) for e in shadow["wouldCancel"]] == [
        ("no rm: rm -rf /", 1, "userMessageInbound")]
    assert shadow["wouldCancel"][0]["input"] == "rm -rf /"
    usage = dict(UsageDaily.objects.values_list("plugin_slug", "runs"))
    assert usage == {"guard:shadow": 2}   # shadow runs are metered apart from live runs


def test_changes_and_failures_are_recorded_not_applied(api_client, install, eager):
    shout = install(SHOUT, name="shout")
    broken = install("globalThis.middleware.userMessageInbound = async () => { throw new Error('oops'); };",
                     name="broken")
    set_mode(api_client, shout, mode="shadow")
    set_mode(api_client, broken, mode="shadow")
    assert execute(api_client, dict(INBOUND, text="hello"))["value"] == "hello"
    changed = report(api_client, shout)
    assert changed["counts"]["wouldChange"] == 1
    assert [(e["before"], e["after"]) for e in changed["wouldChange"]] == [("hello", "HELLO")]
    failed = report(api_client, broken)
    assert failed["counts"]["failed"] == 1 and "oops" in failed["failed"][0]["message"]
    assert failed["failed"][0]["input"] == "hello"   # issue 33: an example shows what it was given
    assert HandlerWarning.objects.count() == 0


def test_a_shadowed_draft_runs_next_to_the_live_code_and_promotes_by_deploying(api_client, install, eager):
    guard = install("globalThis.middleware.userMessageInbound = async (c) => c.text;", name="guard")
    versions.create_draft(guard.account, guard.pk, source=VETO, language="javascript")
    response = set_mode(api_client, guard, shadowVersion=2)
    assert response.status_code == 200 and response.json()["shadowVersion"] == 2
    assert execute(api_client)["outcome"] == "unchanged"
    shadow = report(api_client, guard)
    assert shadow["counts"]["wouldCancel"] == 1 and shadow["wouldCancel"][0]["version"] == 2
    promoted = api_client.post(f"/api/v1/plugins/{guard.pk}/promote")
    assert promoted.status_code == 200, promoted.content
    assert (promoted.json()["liveVersion"], promoted.json()["shadowVersion"]) == (2, None)
    assert execute(api_client)["outcome"] == "cancelled"


def test_promoting_a_shadowed_installation_puts_it_back_in_its_place(api_client, install, eager):
    first, _second = install(appender("-a")), install(appender("-b"))
    set_mode(api_client, first, mode="shadow")
    assert execute(api_client, PROMPT, "systemPrompt")["value"] == "base-b"
    response = api_client.post(f"/api/v1/plugins/{first.pk}/promote")
    assert response.status_code == 200 and response.json()["mode"] == "live"
    assert execute(api_client, PROMPT, "systemPrompt")["value"] == "base-a-b"
    assert list(AccountChange.objects.filter(action__in=["shadow", "promote"]).order_by("id")
                .values_list("action", flat=True)) == ["shadow", "shadow", "promote"]
    assert api_client.post(f"/api/v1/plugins/{first.pk}/promote").status_code == 409   # nothing in shadow now


def test_shadow_runs_have_no_side_effects(api_client, install, eager):
    writer = install("globalThis.middleware.systemPrompt = async (c) => "
                     "(await host.workspace.write('x.txt', 'y'), c.systemPrompt + '!');",
                     name="writer", grant=["host:workspace"])
    set_mode(api_client, writer, mode="shadow")
    execute(api_client, PROMPT, "systemPrompt")
    assert WorkspaceFile.objects.count() == 0
    assert report(api_client, writer)["counts"]["wouldChange"] == 1


def test_the_shadow_run_is_queued_for_a_worker_not_made_in_the_request(api_client, install):
    veto = install(VETO, name="guard")
    set_mode(api_client, veto, mode="shadow")
    saved = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = "memory://", False
    app._pool = app.amqp._producer_pool = None   # a pool made earlier would still point at var/broker
    try:
        assert execute(api_client)["outcome"] == "unchanged"
        assert report(api_client, veto)["counts"]["calls"] == 0   # answered before the shadow ran
        with app.connection_for_read() as connection:
            message = connection.SimpleQueue("shadow").get(timeout=5)
            task, (args, kwargs, _) = message.headers["task"], message.decode()
            message.ack()
    finally:
        app.conf.broker_url, app.conf.task_always_eager = saved
        app._pool = app.amqp._producer_pool = None
    assert task == "plugins_app.tasks.run_shadow"
    app.tasks[task].apply(args=args, kwargs=kwargs)   # what the worker does
    assert report(api_client, veto)["counts"] == {"calls": 1, "same": 0, "different": 0, "wouldCancel": 1,
                                                  "wouldNoLongerCancel": 0, "failed": 0, "wouldChange": 0}


def test_bad_mode_changes_are_4xx_and_change_nothing(api_client, other_api_client, install, account, eager):
    plugin = install(appender("-a"))
    versions.create_draft(account, plugin.pk,
                          source=appender("-b") + "\nconst never = () => host.fetch('http://127.0.0.1:9/');",
                          language="javascript")
    before = AccountChange.objects.count()
    assert set_mode(api_client, plugin, mode="ghost").status_code == 400
    assert set_mode(api_client, plugin, shadowVersion=9).status_code == 404
    assert set_mode(api_client, plugin, shadowVersion=1).status_code == 400        # the live version
    response = set_mode(api_client, plugin, shadowVersion=2)                       # asks for host:fetch
    assert response.status_code == 409 and response.json()["error"]["missing"] == ["host:fetch"]
    assert set_mode(other_api_client, plugin, mode="shadow").status_code == 404
    assert other_api_client.get(f"/api/v1/plugins/{plugin.pk}/shadow").status_code == 404
    assert set_mode(api_client, plugin, mode="shadow", enabled="yes").status_code == 400
    installation = Installation.objects.get(pk=plugin.pk)
    assert (installation.mode, installation.shadow_version) == ("live", None)
    assert AccountChange.objects.count() == before

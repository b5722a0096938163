"""The one seam: a chain run in each mode, and from callers other than the execute view (cron, a timer, a
peer message), opens its span and counts in the metrics, and a granted secret's value never comes back."""

from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from plugins_app.models import CancelLog, CronRun, ShadowSample
from plugins_app.services.execution import invoke as seam
from plugins_app.services.execution import tryit
from plugins_app.services.observability import tracing
from plugins_app.services.scheduling import cron, notifications
from plugins_app.services.secrets import store
from plugins_app.services.versions import replay, shadow

from ..conftest import PROMPT

pytestmark = pytest.mark.django_db

VALUE = "seam-canary-5e1b9a77d03c"
TOKEN = "metrics-t0ken"
# Granted the secret, never sending it: the platform sent the value in the context, and the hub's
# defensive pass must keep it out of what comes back (services/secrets/egress.py).
ASKS = "// asks for {{secret.TOKEN}}, though it never sends it\n"
PROMPT_ECHO = ASKS + "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '!';"
VETO = ASKS + "globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('saw ' + c.text);"
CRON_ECHO = ASKS + "globalThis.middleware.cronJobFiring = async (c) => c.prompt + ' [' + c.prompt + ']';"
TIMER_ECHO = ASKS + "globalThis.middleware.notifyScheduled = async (c) => ({message: c.message + '?', delaySeconds: c.delaySeconds});"


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.HUB_METRICS = replace(settings.HUB_METRICS, token=TOKEN)


@pytest.fixture
def secret(account):
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["127.0.0.1"])


def scrape(client) -> dict:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.content.decode()) for s in family.samples}


def runs(samples: dict, hook: str, mode: str, origin: str, outcome: str) -> float:
    labels = frozenset({"hook": hook, "mode": mode, "origin": origin, "outcome": outcome}.items())
    return samples.get(("hub_chain_runs_total", labels), 0.0)


def spans(collector, name: str) -> list:
    assert tracing.force_flush()
    return [span for span in collector.spans if span.name == name]


def attributes(span) -> dict:
    return {a.key: a.value.string_value for a in span.attributes}


def secret_prompt() -> dict:
    return dict(PROMPT, systemPrompt=f"key {VALUE}")


def test_try_mode(client, install, account, secret, collector):
    install(PROMPT_ECHO, name="echo", grant=["secret:TOKEN"])
    before = scrape(client)
    run = tryit.try_chain(account, "systemPrompt", secret_prompt())
    assert (run.before, run.after) == ("key [secret TOKEN]", "key [secret TOKEN]!") and VALUE not in repr(run)
    assert runs(scrape(client), "systemPrompt", "try", "try", "changed") - \
        runs(before, "systemPrompt", "try", "try", "changed") == 1
    [span] = spans(collector, "try systemPrompt")
    assert attributes(span)["hub.mode"] == "try"


def test_replay_mode(client, install, account, secret, collector):
    veto = install(VETO, name="veto", grant=["secret:TOKEN"])
    inbound = {"sessionId": "10", "channelId": None, "text": f"key {VALUE}", "mediaIds": []}
    # The recorded cancel names the real installation (PostgreSQL checks the foreign key at commit).
    entry = CancelLog.objects.create(account=account, hook="userMessageInbound", installation_id=veto.pk,
                                     plugin_slug="veto", reason="recorded", context=inbound)
    before = scrape(client)
    replayed = replay.as_dict(replay.replay_cancellation(account, entry.pk))
    assert replayed["replayed"]["cancellation"]["reason"] == "saw key [secret TOKEN]"
    assert VALUE not in repr(replayed["replayed"])
    assert runs(scrape(client), "userMessageInbound", "replay", "replay", "cancelled") - \
        runs(before, "userMessageInbound", "replay", "replay", "cancelled") == 1
    assert len(spans(collector, "replay userMessageInbound")) == 1


def test_shadow_mode(client, install, account, secret, collector):
    echo = install(PROMPT_ECHO, name="echo", grant=["secret:TOKEN"])
    shadow.set_mode(account, echo.pk, "shadow")
    before = scrape(client)
    assert shadow.run(account.pk, "systemPrompt", secret_prompt()) == 1
    sample = ShadowSample.objects.get(installation=echo)
    assert (sample.before, sample.after) == ("key [secret TOKEN]", "key [secret TOKEN]!")
    assert runs(scrape(client), "systemPrompt", "shadow", "shadow", "changed") - \
        runs(before, "systemPrompt", "shadow", "shadow", "changed") == 1
    [span] = spans(collector, "shadow systemPrompt")
    assert attributes(span)["hub.origin"] == "shadow"


def test_a_cron_run_is_a_live_run_with_its_span_and_count(client, install, account, secret, collector):
    install(CRON_ECHO, name="echo", grant=["secret:TOKEN"])
    job = cron.create_job(account, agent_id="7", name="nightly", prompt=f"check {VALUE}", interval_seconds=3600)
    before = scrape(client)
    run = cron.run_now(account, job.pk)
    assert run.status == CronRun.Status.DISPATCHING
    assert run.prompt == "check [secret TOKEN] [check [secret TOKEN]]"
    assert runs(scrape(client), "cronJobFiring", "live", "cron", "changed") - \
        runs(before, "cronJobFiring", "live", "cron", "changed") == 1
    [span] = spans(collector, "execute cronJobFiring")
    assert attributes(span) | {"hub.account_id": ""} == {
        "hub.hook": "cronJobFiring", "hub.account_id": "", "hub.mode": "live", "hub.origin": "cron",
        "hub.outcome": "changed"}


def test_a_timer_is_a_live_run_with_its_span_and_count(client, install, account, secret, collector):
    install(TIMER_ECHO, name="echo", grant=["secret:TOKEN"])
    before = scrape(client)
    note, result, _ = notifications.schedule(account, session_id="10", message=f"ping {VALUE}", delay_seconds=60)
    assert note.message == result.context["message"] == "ping [secret TOKEN]?"
    assert runs(scrape(client), "notifyScheduled", "live", "timer", "changed") - \
        runs(before, "notifyScheduled", "live", "timer", "changed") == 1
    assert len(spans(collector, "execute notifyScheduled")) == 1


def test_a_refused_run_is_counted_and_its_span_errs(client, account, collector):
    before = scrape(client)
    with pytest.raises(Exception, match="sessionId"):
        seam.invoke(account, "systemPrompt", {"agentId": "2"}, origin="command")
    assert runs(scrape(client), "systemPrompt", "live", "command", "rejected") - \
        runs(before, "systemPrompt", "live", "command", "rejected") == 1
    [span] = spans(collector, "execute systemPrompt")
    assert span.status.code == span.status.STATUS_CODE_ERROR


def test_the_three_steps_make_one_run(install, account, secret):
    install(PROMPT_ECHO, name="echo", grant=["secret:TOKEN"])
    invocation = seam.prepare(account, "systemPrompt", secret_prompt(), origin="command")
    assert [h.plugin for h in invocation.handlers] == ["echo"] and invocation.result is None
    seam.run(invocation)
    assert VALUE in invocation.result.value   # not scrubbed yet: finish does that, before anything leaves
    seam.finish(invocation)
    assert invocation.result.value == "key [secret TOKEN]!" and invocation.closed


def test_without_its_probes_the_seam_refuses_to_run(account, monkeypatch):
    monkeypatch.setattr(seam, "probes", seam.Probes())
    with pytest.raises(RuntimeError, match="not wired"):
        seam.invoke(account, "systemPrompt", PROMPT)

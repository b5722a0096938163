"""A unique secret value is searched for in every output of the hub: API answers, admin pages, the CSV
export, captured log records, traces, warnings, cancel rows, plugin logs, the change log, a replay,
/metrics and OpenTelemetry spans; the test server echoes it back and the plugins log, return, throw
and cancel with whatever they got."""

import logging
from dataclasses import replace

import pytest
from django.urls import reverse

from plugins_app.models import CancelLog, HandlerWarning, PluginLog
from plugins_app.services.observability import tracing
from plugins_app.services.secrets import store

from ..conftest import PROMPT
from ..host.stubs import StubServer

pytestmark = pytest.mark.django_db

VALUE = "leak-canary-8d41f0b7c2e94a6b"
GRANT = ["host:fetch", "secret:TOKEN"]
INBOUND = {"sessionId": "10", "channelId": None, "text": "hi", "mediaIds": []}
METRICS_TOKEN = "metrics-t0ken"


def _echo(req):
    token = req.headers.get("Authorization") or ""
    return 200, {"Content-Type": "text/plain", "X-Seen": token}, f"you sent {token}".encode()


FETCH = "const r = await host.fetch(URL, {headers: {Authorization: 'Bearer {{secret.TOKEN}}'}}); const got = await r.text();"
LEAKER = ("globalThis.middleware.systemPrompt = async (c) => { FETCH console.log('got', got, r.headers['x-seen']); "
          "host.log(got); return c.systemPrompt + ' | ' + got + ' | ' + r.headers['x-seen']; };")
THROWER = "globalThis.middleware.systemPrompt = async (c) => { FETCH throw new Error('failed with ' + got); };"
VETOER = "globalThis.middleware.userMessageInbound = async (c, t) => { FETCH return t.cancel('vetoed: ' + got); };"
# The platform itself sent the value (a user pasted it): the defensive pass still keeps it out of outputs.
ECHOER = ("// granted {{secret.TOKEN}}, though it never sends it\n"
          "globalThis.middleware.assistantMessageOutbound = async (c) => { console.log(c.text); return c.text + '!'; };")


@pytest.fixture
def site(settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)
    server = StubServer(_echo)
    yield server
    server.close()


def _plugin(template: str, url: str) -> str:
    return template.replace("FETCH", FETCH).replace("URL", repr(url))


def _run_everything(api_client, account, install, site) -> list[tuple[str, str]]:
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=[site.url], description="canary")
    store.set_secret(account, "TOKEN", value=VALUE)   # a rotation, for the change log
    url = f"{site.url}/echo"
    for name, template in (("leaker", LEAKER), ("thrower", THROWER), ("vetoer", VETOER)):
        install(_plugin(template, url), name=name, grant=GRANT)
    install(ECHOER, name="echoer", grant=["secret:TOKEN"])
    outputs = []

    def post(path, body):
        response = api_client.post(path, body, format="json")
        assert response.status_code == 200, response.content
        outputs.append((path, response.content.decode()))
        return response.json()

    prompt = post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT})
    assert "[secret TOKEN]" in prompt["value"]   # the echo reached the plugin, redacted
    vetoed = post("/api/v1/hooks/userMessageInbound/execute", {"context": INBOUND})
    assert vetoed["outcome"] == "cancelled"
    outbound = post("/api/v1/hooks/assistantMessageOutbound/execute",
                    {"context": {"sessionId": "10", "channelId": None, "text": f"my key is {VALUE}"}})
    assert outbound["value"] == "my key is [secret TOKEN]!"
    post(f"/api/v1/cancellations/{CancelLog.objects.get().pk}/replay", {})
    assert len(site.requests) >= 3 and all(r.headers["Authorization"] == f"Bearer {VALUE}" for r in site.requests)
    for path in ("/api/v1/secrets", "/api/v1/logs", "/api/v1/warnings", "/api/v1/cancellations", "/api/v1/changes",
                 "/api/v1/plugins"):
        response = api_client.get(path)
        assert response.status_code == 200, path
        outputs.append((path, response.content.decode()))
    return outputs


def test_the_value_appears_in_no_output(api_client, operator_client, account, install, site, collector, caplog,
                                        settings):
    settings.HUB_METRICS = replace(settings.HUB_METRICS, token=METRICS_TOKEN)
    caplog.set_level(logging.DEBUG)
    outputs = _run_everything(api_client, account, install, site)
    secret = store.get_secret(account, "TOKEN")
    for name in ("secret", "cancellog", "handlerwarning", "pluginlog", "accountchange", "installation"):
        page = operator_client.get(f"/admin/plugins_app/{name}/")
        assert page.status_code == 200, name
        outputs.append((f"admin {name}", page.content.decode()))
    for path in (f"/admin/plugins_app/secret/{secret.pk}/change/", reverse("admin:plugins_app_cancellog_export"),
                 f"/admin/plugins_app/cancellog/{CancelLog.objects.get().pk}/change/", "/metrics"):
        page = operator_client.get(path, HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
        assert page.status_code == 200, path
        outputs.append((path, b"".join(page.streaming_content if page.streaming else [page.content]).decode()))
    assert tracing.force_flush()
    outputs.append(("spans", repr([(s.name, list(s.attributes), s.status.message) for s in collector.spans])))
    outputs.append(("log records", "\n".join(r.getMessage() for r in caplog.records)))
    outputs.append(("rows", repr([list(CancelLog.objects.values()), list(HandlerWarning.objects.values()),
                                  list(PluginLog.objects.values())])))

    leaked = [where for where, text in outputs if VALUE in text]
    assert leaked == []
    # ...and the searches looked at the right places: the redacted forms are there.
    every = "\n".join(text for _, text in outputs)
    assert every.count("[secret TOKEN]") >= 6
    assert "vetoed: you sent Bearer [secret TOKEN]" in CancelLog.objects.get().reason
    assert "failed with you sent Bearer [secret TOKEN]" in HandlerWarning.objects.get().message
    assert any("[secret TOKEN]" in line.message for line in PluginLog.objects.all())
    assert any(s.name == "handler thrower" for s in collector.spans)


def test_a_shadow_run_reports_no_value(api_client, account, install, eager):
    # The platform sent the value; a shadowed veto granted the secret cancels with it: the shadow
    # report (samples of would-cancel reasons) keeps the placeholder.
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["127.0.0.1"])
    veto = install("// {{secret.TOKEN}}\nglobalThis.middleware.userMessageInbound = async (c, t) => "
                   "t.cancel('saw ' + c.text);", name="guard", grant=["secret:TOKEN"])
    assert api_client.patch(f"/api/v1/plugins/{veto.pk}", {"mode": "shadow"}, format="json").status_code == 200
    answer = api_client.post("/api/v1/hooks/userMessageInbound/execute",
                             {"context": dict(INBOUND, text=f"key {VALUE}")}, format="json")
    assert answer.status_code == 200
    report = api_client.get(f"/api/v1/plugins/{veto.pk}/shadow").content.decode()
    assert "saw key [secret TOKEN]" in report and VALUE not in report

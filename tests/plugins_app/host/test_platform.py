"""The platform bridge: its configuration API and the signed, retried calls to a real local server."""

import json
import socket
import time
from dataclasses import replace

import pytest

from plugins_app.errors import PlatformError
from plugins_app.models import PlatformConfig
from plugins_app.services.host import platform

from .stubs import PlatformStub, json_answer

UNREACHABLE = "^the platform could not be reached$"

pytestmark = pytest.mark.django_db

SECRET = "s3cret-for-tests"


@pytest.fixture
def platform_stub():
    stub = PlatformStub(SECRET, {"/conversations/read": {"messages": [{"role": "user", "text": "hi"}]}})
    yield stub
    stub.close()


@pytest.fixture
def bridged(account, platform_stub):
    platform.configure(account, {"baseUrl": platform_stub.url + "/", "signingSecret": SECRET})
    return platform_stub


def test_unconfigured_platform_reads_as_empty(api_client):
    response = api_client.get("/api/v1/platform")
    assert response.status_code == 200
    assert response.json() == {"baseUrl": None, "hasSecret": False, "updatedAt": None}


def test_put_stores_the_bridge_and_never_returns_the_secret(api_client, account):
    response = api_client.put("/api/v1/platform", {"baseUrl": "https://127.0.0.1/hub",
                                                   "signingSecret": SECRET}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["baseUrl"] == "https://127.0.0.1/hub"
    assert response.json()["hasSecret"] is True
    got = api_client.get("/api/v1/platform")
    assert got.json()["hasSecret"] is True
    assert SECRET.encode() not in response.content + got.content
    assert PlatformConfig.objects.get(account=account).signing_secret == SECRET


def test_put_without_a_secret_keeps_the_stored_one(api_client, account):
    api_client.put("/api/v1/platform", {"baseUrl": "https://127.0.0.1/a", "signingSecret": SECRET}, format="json")
    response = api_client.put("/api/v1/platform", {"baseUrl": "https://127.0.0.1/b"}, format="json")
    assert response.json() == dict(response.json(), baseUrl="https://127.0.0.1/b", hasSecret=True)
    assert PlatformConfig.objects.get(account=account).signing_secret == SECRET


@pytest.mark.parametrize("body, field", [
    ({"baseUrl": "ftp://127.0.0.1"}, "baseUrl"),
    ({"baseUrl": "not a url"}, "baseUrl"),
    ({"baseUrl": ""}, "baseUrl"),
    ({"baseUrl": "https://127.0.0.1?a=1"}, "baseUrl"),
    ({"baseUrl": "https://user:pw@127.0.0.1/hub"}, "baseUrl"),
    ({"baseUrl": "https://127.0.0.1", "signingSecret": 12}, "signingSecret"),
    ({"baseUrl": "https://127.0.0.1", "signingSecret": "x" * 201}, "signingSecret"),
    ({"baseUrl": "https://127.0.0.1", "signingSecret": ""}, "signingSecret"),
])
def test_bad_input_is_a_400_naming_the_field_and_changes_nothing(api_client, account, body, field):
    api_client.put("/api/v1/platform", {"baseUrl": "https://127.0.0.1/kept", "signingSecret": SECRET}, format="json")
    response = api_client.put("/api/v1/platform", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field
    config = PlatformConfig.objects.get(account=account)
    assert (config.base_url, config.signing_secret) == ("https://127.0.0.1/kept", SECRET)


def test_each_account_sees_only_its_own_bridge(api_client, other_api_client):
    api_client.put("/api/v1/platform", {"baseUrl": "https://127.0.0.1/mine", "signingSecret": SECRET}, format="json")
    assert other_api_client.get("/api/v1/platform").json()["baseUrl"] is None


def test_call_posts_signed_json_and_returns_the_answer(account, bridged):
    answer = platform.call(account, "/conversations/read", {"sessionId": "42"})
    assert answer == {"messages": [{"role": "user", "text": "hi"}]}
    req = bridged.requests[-1]
    assert (req.method, req.path, req.json()) == ("POST", "/conversations/read", {"sessionId": "42"})
    assert bridged.bad_signatures == 0
    assert abs(int(req.headers["X-Hub-Timestamp"]) - time.time()) < 60
    assert req.headers["X-Hub-Signature"] == platform.sign(SECRET, req.headers["X-Hub-Timestamp"], req.body)


def test_a_wrong_secret_is_refused_by_the_platform(account, bridged, caplog):
    platform.configure(account, {"signingSecret": "not-the-platform-secret"})
    with pytest.raises(PlatformError, match=UNREACHABLE):
        platform.call(account, "/conversations/read", {"sessionId": "42"})
    assert bridged.bad_signatures == 1
    assert "HTTP 401" in caplog.text


def test_call_without_a_bridge_raises(account):
    with pytest.raises(PlatformError, match="not configured"):
        platform.call(account, "/conversations/read", {})


def test_call_to_a_closed_port_raises_unreachable(account, caplog):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    platform.configure(account, {"baseUrl": f"http://127.0.0.1:{port}", "signingSecret": SECRET})
    with pytest.raises(PlatformError, match=UNREACHABLE):
        platform.call(account, "/x", {}, timeout=2)
    assert "ConnectionRefusedError" in caplog.text


def test_non_2xx_and_non_json_answers_raise(account, bridged, caplog):
    bridged.routes["/boom"] = lambda req: json_answer(500, {"error": "down"})
    bridged.routes["/html"] = lambda req: (200, {"Content-Type": "text/html"}, b"<html>")
    with pytest.raises(PlatformError, match=UNREACHABLE):
        platform.call(account, "/boom", {})
    with pytest.raises(PlatformError, match=UNREACHABLE):
        platform.call(account, "/html", {})
    assert "HTTP 500" in caplog.text and "not JSON" in caplog.text


def test_deliver_retries_temporary_failures_with_backoff(account, bridged):
    statuses = iter([503, 502, 200])
    bridged.routes["/notifications"] = lambda req: json_answer(next(statuses), {"ok": True})
    assert platform.deliver(account, "/notifications", {"n": 1}, backoff=0.01) == {"ok": True}
    assert [r.path for r in bridged.requests] == ["/notifications"] * 3
    assert all(r.json() == {"n": 1} for r in bridged.requests)


def test_deliver_gives_up_after_its_attempts(account, bridged):
    bridged.routes["/notifications"] = lambda req: json_answer(503, {})
    with pytest.raises(PlatformError, match=UNREACHABLE):
        platform.deliver(account, "/notifications", {}, attempts=3, backoff=0.01)
    assert len(bridged.requests) == 3


def test_deliver_does_not_retry_a_permanent_refusal(account, bridged):
    bridged.routes["/missions"] = lambda req: json_answer(422, {"error": "bad mission"})
    with pytest.raises(PlatformError, match=UNREACHABLE) as raised:
        platform.deliver(account, "/missions", {}, backoff=0.01)
    assert not raised.value.retryable
    assert len(bridged.requests) == 1


def test_verify_signature_rejects_tampering_and_stale_timestamps():
    body = json.dumps({"a": 1}).encode()
    ts = str(int(time.time()))
    header = platform.sign(SECRET, ts, body)
    assert platform.verify_signature(SECRET, ts, body, header)
    assert platform.verify_signature(SECRET, ts, body.decode(), header)
    assert not platform.verify_signature(SECRET, ts, body + b" ", header)
    assert not platform.verify_signature("other", ts, body, header)
    assert not platform.verify_signature(SECRET, ts, body, None)
    old = str(int(time.time()) - 3600)
    assert not platform.verify_signature(SECRET, old, body, platform.sign(SECRET, old, body))
    assert platform.verify_signature(SECRET, old, body, platform.sign(SECRET, old, body), tolerance=None)


# --- where the bridge may connect (HUB_PLATFORM_ALLOWED_HOSTS) ------------------------------------

def _resolving(monkeypatch, answers: dict):
    """Resolve the names in `answers` (name -> list of addresses, changeable later); others as usual."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in answers[host]]
        return real(host, port, *args, **kwargs)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize("allowed, url", [
    ([], "http://127.0.0.1:9/hub"),                                   # the production default
    (["10.0.0.0/8"], "http://127.0.0.1:9/hub"),
    (["10.0.0.0/8"], "http://[::ffff:127.0.0.1]:9/hub"),
    (["127.0.0.1"], "http://127.0.0.2:9/hub"),
    (["0.0.0.0/0"], "http://169.254.169.254/latest"),                 # metadata: never
    (["0.0.0.0/0"], "http://0.0.0.0:9/hub"),
    (["127.0.0.1"], "http://two.test:9/hub"),                         # one of its addresses is outside
    (["127.0.0.1"], "http://nowhere.invalid/hub"),
])
def test_a_base_url_outside_the_allow_list_is_a_400_naming_base_url(api_client, account, settings, monkeypatch,
                                                                    allowed, url):
    _resolving(monkeypatch, {"two.test": ["127.0.0.1", "10.1.2.3"]})
    settings.HUB_HOST = replace(settings.HUB_HOST, platform_allowed_hosts=allowed)
    response = api_client.put("/api/v1/platform", {"baseUrl": url, "signingSecret": SECRET}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "baseUrl"
    assert "HUB_PLATFORM_ALLOWED_HOSTS" in response.json()["error"]["message"]
    assert not PlatformConfig.objects.filter(account=account).exists()


@pytest.mark.parametrize("allowed, url", [
    (["10.0.0.0/8", "127.0.0.1"], "http://127.0.0.1:9/hub"),
    ("platform.internal,10.0.0.0/8", "https://platform.internal/hub"),   # a listed name: DNS is trusted
    ([".internal"], "https://eu.platform.internal/hub"),
    (["127.0.0.0/8"], "http://one.test:9/hub"),                          # a name whose addresses are all allowed
    (["::1"], "http://[::1]:9/hub"),
])
def test_a_base_url_the_operator_allows_is_stored(api_client, settings, monkeypatch, allowed, url):
    _resolving(monkeypatch, {"one.test": ["127.0.0.1", "127.0.0.2"]})
    settings.HUB_HOST = replace(settings.HUB_HOST, platform_allowed_hosts=allowed)
    response = api_client.put("/api/v1/platform", {"baseUrl": url, "signingSecret": SECRET}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["baseUrl"] == url


def test_every_call_checks_the_allow_list_again(account, bridged, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, platform_allowed_hosts=["10.0.0.0/8"])   # the operator narrowed it after the URL was stored
    with pytest.raises(PlatformError, match=UNREACHABLE):
        platform.call(account, "/conversations/read", {"sessionId": "42"})
    assert bridged.requests == []


def test_a_name_rebound_after_it_was_stored_is_not_connected_to(account, platform_stub, monkeypatch, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, platform_allowed_hosts=["127.0.0.1"])
    answers = {"platform.test": ["127.0.0.1"]}
    _resolving(monkeypatch, answers)
    platform.configure(account, {"baseUrl": f"http://platform.test:{platform_stub.port}", "signingSecret": SECRET})
    assert platform.call(account, "/conversations/read", {"sessionId": "1"})["messages"]
    assert platform_stub.requests[-1].headers["Host"] == f"platform.test:{platform_stub.port}"
    with socket.socket() as inside:   # what the rebound name now points at
        inside.bind(("127.0.0.2", platform_stub.port))
        inside.listen()
        inside.settimeout(0.3)
        answers["platform.test"] = ["127.0.0.2"]
        with pytest.raises(PlatformError, match=UNREACHABLE):
            platform.call(account, "/conversations/read", {"sessionId": "1"})
        with pytest.raises(TimeoutError):
            inside.accept()
    assert len(platform_stub.requests) == 1


def test_an_open_port_and_a_closed_one_fail_alike(api_client, install, account, platform_stub, caplog):
    # Whatever answers (or not) at the URL, a plugin reads the same text; the detail goes to the log.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    install("globalThis.middleware.systemPrompt = async () => "
            "host.session.conversation.read().then(() => 'read', (e) => String(e.message ?? e));",
            grant=["host:session"])
    seen = []
    for base in (f"{platform_stub.url}/no-such-path", f"http://127.0.0.1:{closed}/hub"):
        platform.configure(account, {"baseUrl": base, "signingSecret": SECRET})
        response = api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": {
            "sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "x"}}, format="json")
        seen.append(response.json()["value"])
    assert seen == ["host.session.conversation.read: the platform could not be reached"] * 2
    assert "HTTP 404" in caplog.text and "ConnectionRefusedError" in caplog.text


def test_the_allow_list_setting_must_parse(settings):
    from django.core.exceptions import ImproperlyConfigured
    settings.HUB_HOST = replace(settings.HUB_HOST, platform_allowed_hosts=["10.0.0.0/99"])
    with pytest.raises(ImproperlyConfigured, match="10.0.0.0/99"):
        platform.allowed_hosts()
    [error] = platform.check_allowed_hosts_setting()
    assert error.id == "plugins_app.E001"


# --- no signing secret, no delivery --------------------------------------------------------------

def test_a_bridge_cannot_be_saved_without_a_secret(api_client, account):
    response = api_client.put("/api/v1/platform", {"baseUrl": "http://127.0.0.1:9/hub"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "signingSecret"
    assert not PlatformConfig.objects.filter(account=account).exists()


def test_a_stored_bridge_without_a_secret_sends_nothing(account, platform_stub):
    # A row saved before secrets were required.
    PlatformConfig.objects.create(account=account, base_url=platform_stub.url, signing_secret="")
    with pytest.raises(PlatformError, match="no signing secret") as raised:
        platform.call(account, "/conversations/read", {"sessionId": "1"})
    assert not raised.value.retryable
    assert platform_stub.requests == []

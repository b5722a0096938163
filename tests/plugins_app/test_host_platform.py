"""The platform bridge: its configuration API and the signed, retried calls to a real local server."""

import json
import socket
import time

import pytest

from plugins_app.errors import PlatformError
from plugins_app.models import PlatformConfig
from plugins_app.services import platform

from .host_stubs import PlatformStub, json_answer

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
    response = api_client.put("/api/v1/platform", {"baseUrl": "https://platform.example.com/hub",
                                                   "signingSecret": SECRET}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["baseUrl"] == "https://platform.example.com/hub"
    assert response.json()["hasSecret"] is True
    got = api_client.get("/api/v1/platform")
    assert got.json()["hasSecret"] is True
    assert SECRET.encode() not in response.content + got.content
    assert PlatformConfig.objects.get(account=account).signing_secret == SECRET


def test_put_without_a_secret_keeps_the_stored_one(api_client, account):
    api_client.put("/api/v1/platform", {"baseUrl": "https://a.example", "signingSecret": SECRET}, format="json")
    response = api_client.put("/api/v1/platform", {"baseUrl": "https://b.example"}, format="json")
    assert response.json() == dict(response.json(), baseUrl="https://b.example", hasSecret=True)
    assert PlatformConfig.objects.get(account=account).signing_secret == SECRET


@pytest.mark.parametrize("body, field", [
    ({"baseUrl": "ftp://x.example"}, "baseUrl"),
    ({"baseUrl": "not a url"}, "baseUrl"),
    ({"baseUrl": ""}, "baseUrl"),
    ({"baseUrl": "https://x.example?a=1"}, "baseUrl"),
    ({"baseUrl": "https://x.example", "signingSecret": 12}, "signingSecret"),
    ({"baseUrl": "https://x.example", "signingSecret": "x" * 201}, "signingSecret"),
])
def test_bad_input_is_a_400_naming_the_field_and_changes_nothing(api_client, account, body, field):
    api_client.put("/api/v1/platform", {"baseUrl": "https://kept.example", "signingSecret": SECRET}, format="json")
    response = api_client.put("/api/v1/platform", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field
    config = PlatformConfig.objects.get(account=account)
    assert (config.base_url, config.signing_secret) == ("https://kept.example", SECRET)


def test_each_account_sees_only_its_own_bridge(api_client, other_api_client):
    api_client.put("/api/v1/platform", {"baseUrl": "https://mine.example", "signingSecret": SECRET}, format="json")
    assert other_api_client.get("/api/v1/platform").json()["baseUrl"] is None


def test_call_posts_signed_json_and_returns_the_answer(account, bridged):
    answer = platform.call(account, "/conversations/read", {"sessionId": "42"})
    assert answer == {"messages": [{"role": "user", "text": "hi"}]}
    req = bridged.requests[-1]
    assert (req.method, req.path, req.json()) == ("POST", "/conversations/read", {"sessionId": "42"})
    assert bridged.bad_signatures == 0
    assert abs(int(req.headers["X-Hub-Timestamp"]) - time.time()) < 60
    assert req.headers["X-Hub-Signature"] == platform.sign(SECRET, req.headers["X-Hub-Timestamp"], req.body)


def test_a_wrong_secret_is_refused_by_the_platform(account, bridged):
    platform.configure(account, {"signingSecret": "not-the-platform-secret"})
    with pytest.raises(PlatformError, match="HTTP 401"):
        platform.call(account, "/conversations/read", {"sessionId": "42"})
    assert bridged.bad_signatures == 1


def test_call_without_a_bridge_raises(account):
    with pytest.raises(PlatformError, match="not configured"):
        platform.call(account, "/conversations/read", {})


def test_call_to_a_closed_port_raises_unreachable(account):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    platform.configure(account, {"baseUrl": f"http://127.0.0.1:{port}", "signingSecret": SECRET})
    with pytest.raises(PlatformError, match="unreachable"):
        platform.call(account, "/x", {}, timeout=2)


def test_non_2xx_and_non_json_answers_raise(account, bridged):
    bridged.routes["/boom"] = lambda req: json_answer(500, {"error": "down"})
    bridged.routes["/html"] = lambda req: (200, {"Content-Type": "text/html"}, b"<html>")
    with pytest.raises(PlatformError, match="HTTP 500"):
        platform.call(account, "/boom", {})
    with pytest.raises(PlatformError, match="not JSON"):
        platform.call(account, "/html", {})


def test_deliver_retries_temporary_failures_with_backoff(account, bridged):
    statuses = iter([503, 502, 200])
    bridged.routes["/notifications"] = lambda req: json_answer(next(statuses), {"ok": True})
    assert platform.deliver(account, "/notifications", {"n": 1}, backoff=0.01) == {"ok": True}
    assert [r.path for r in bridged.requests] == ["/notifications"] * 3
    assert all(r.json() == {"n": 1} for r in bridged.requests)


def test_deliver_gives_up_after_its_attempts(account, bridged):
    bridged.routes["/notifications"] = lambda req: json_answer(503, {})
    with pytest.raises(PlatformError, match="HTTP 503"):
        platform.deliver(account, "/notifications", {}, attempts=3, backoff=0.01)
    assert len(bridged.requests) == 3


def test_deliver_does_not_retry_a_permanent_refusal(account, bridged):
    bridged.routes["/missions"] = lambda req: json_answer(422, {"error": "bad mission"})
    with pytest.raises(PlatformError, match="HTTP 422"):
        platform.deliver(account, "/missions", {}, backoff=0.01)
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

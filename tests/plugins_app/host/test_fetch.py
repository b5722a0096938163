"""host.fetch against a real local server, and the SSRF guard with loopback and private addresses."""

import ipaddress
import json
import socket
import time
from dataclasses import replace

import pytest

from plugins_app.runtime.web.chain import HostError
from plugins_app.services.host import ssrf
from plugins_app.services.host.fetch import fetch_url

from ..conftest import PROMPT
from .stubs import StubServer, execute, json_answer, reporter

pytestmark = pytest.mark.django_db

FETCH = ["host:fetch"]


def _site(req):
    if req.path == "/json":
        return json_answer(200, {"hello": "world"})
    if req.path == "/echo":
        return json_answer(201, {"method": req.method, "body": req.body.decode(),
                                 "token": req.headers.get("X-Token"), "host": req.headers.get("Host")})
    if req.path == "/redirect":
        return 302, {"Location": "http://169.254.169.254/latest/meta-data/"}, b""
    if req.path == "/big":
        return 200, {"Content-Type": "text/plain"}, b"x" * 5000
    if req.path == "/slow":
        time.sleep(3)
        return 200, {}, b"late"
    return 404, {"Content-Type": "text/plain", "X-Multi": "a"}, b"missing"


@pytest.fixture
def site():
    server = StubServer(_site)
    yield server
    server.close()


@pytest.fixture
def local_allowed(settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)


def test_a_plugin_fetches_json(api_client, install, site, local_allowed):
    install(reporter("systemPrompt", f"host.fetch('{site.url}/json').then(async (r) => "
                                     "({status: r.status, ok: r.ok, type: r.headers['content-type'], data: await r.json()}))"),
            grant=FETCH)
    body = execute(api_client, "systemPrompt", PROMPT)
    assert json.loads(body["value"]) == {"ok": {"status": 200, "ok": True, "type": "application/json",
                                                "data": {"hello": "world"}}}


def test_method_headers_and_body_are_sent(api_client, install, site, local_allowed):
    install(reporter("systemPrompt", f"host.fetch('{site.url}/echo', {{method: 'POST', "
                                     "headers: {'X-Token': 'abc', 'Host': 'evil.example'}, body: 'payload'})"
                                     ".then(async (r) => ({status: r.status, data: await r.json()}))"),
            grant=FETCH)
    result = json.loads(execute(api_client, "systemPrompt", PROMPT)["value"])["ok"]
    assert result["status"] == 201
    # The Host header names the URL's host: a plugin cannot aim the request elsewhere.
    assert result["data"] == {"method": "POST", "body": "payload", "token": "abc", "host": f"127.0.0.1:{site.port}"}
    assert site.requests[-1].body == b"payload"


def test_non_2xx_is_a_result_not_an_error(site, local_allowed):
    answer = fetch_url(f"{site.url}/nothing-here")
    assert (answer["status"], answer["body"], answer["headers"]["x-multi"]) == (404, "missing", "a")


def test_redirects_are_returned_not_followed(site, local_allowed):
    answer = fetch_url(f"{site.url}/redirect")
    assert answer["status"] == 302
    assert answer["headers"]["location"] == "http://169.254.169.254/latest/meta-data/"
    assert [r.path for r in site.requests] == ["/redirect"]


def test_a_response_over_the_cap_is_refused(site, local_allowed, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_max_bytes=4096)
    with pytest.raises(HostError, match="over 4096 bytes"):
        fetch_url(f"{site.url}/big")
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_max_bytes=5000)
    assert len(fetch_url(f"{site.url}/big")["body"]) == 5000


def test_a_slow_server_times_out(site, local_allowed, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_timeout_seconds=1)
    started = time.monotonic()
    with pytest.raises(HostError, match="timed out|time limit"):
        fetch_url(f"{site.url}/slow")
    assert time.monotonic() - started < 2.9   # gave up before the server answered


@pytest.mark.parametrize("url, message", [
    ("file:///etc/passwd", "only http:// and https://"),
    ("ftp://example.com/x", "only http:// and https://"),
    ("http://user:pw@example.com/", "credentials in the URL"),
    ("http://example.com:99999/", "port"),
    ("http:///nohost", "no host"),
])
def test_bad_urls_are_refused(url, message):
    with pytest.raises(HostError, match=message):
        fetch_url(url)


# -- the SSRF guard (HUB_FETCH_ALLOW_PRIVATE is off: the default) ------------------------------

@pytest.mark.parametrize("url, reason", [
    ("http://localhost:{port}/json", "loopback"),
    ("http://127.0.0.1:{port}/json", "loopback"),
    ("http://127.0.0.2:{port}/json", "loopback"),
    ("http://[::1]:{port}/json", "loopback"),
    ("http://2130706433:{port}/json", "loopback"),          # 127.0.0.1 as one number
    ("http://[::ffff:127.0.0.1]:{port}/json", "private|loopback"),
    ("http://10.0.0.1/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://172.16.5.4/", "private"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://[fd00:ec2::254]/", "metadata"),
    ("http://100.100.100.200/", "metadata"),
    ("http://169.254.10.10/", "link-local"),
    ("http://0.0.0.0:{port}/", "unspecified|private"),
    ("http://224.0.0.1/", "multicast"),
])
def test_the_guard_refuses_loopback_private_and_metadata_addresses(site, url, reason):
    with pytest.raises(HostError, match=f"refused: .*({reason})"):
        fetch_url(url.format(port=site.port))
    assert site.requests == []


def test_the_guard_reaches_the_plugin_as_a_rejected_promise(api_client, install, site, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_explain_private=False)   # as in production (DEBUG off)
    install(reporter("systemPrompt", f"host.fetch('http://localhost:{site.port}/json')"), grant=FETCH)
    error = json.loads(execute(api_client, "systemPrompt", PROMPT)["value"])["error"]
    assert "host.fetch refused: localhost (resolves to 127.0.0.1) is a loopback address" in error
    assert "HUB_FETCH_ALLOW_PRIVATE" not in error   # production: no operator switch named to plugin authors
    assert site.requests == []


def test_a_development_servers_refusal_says_how_to_allow_loopback(api_client, install, site, settings):
    # Under `make run` (DEBUG) a developer trying a local server learns the switch; a production
    # server's refusal (the test above) does not name it.
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_explain_private=True)
    with pytest.raises(HostError, match="loopback address.*HUB_FETCH_ALLOW_PRIVATE=1 make run"):
        fetch_url(f"http://127.0.0.1:{site.port}/json")
    install(reporter("systemPrompt", f"host.fetch('http://localhost:{site.port}/json')"), grant=FETCH)
    error = json.loads(execute(api_client, "systemPrompt", PROMPT)["value"])["error"]
    assert "is a loopback address" in error and "HUB_FETCH_ALLOW_PRIVATE=1" in error
    assert site.requests == []
    with pytest.raises(HostError) as unresolved:   # a name that does not resolve has nothing to allow
        fetch_url("http://no-such-host.invalid/")
    assert "HUB_FETCH_ALLOW_PRIVATE" not in str(unresolved.value)


def test_a_name_is_refused_when_any_of_its_addresses_is_private(monkeypatch):
    # A name resolving to one public and one private address (a rebinding set-up) is refused whole.
    def two_addresses(host, port, type=0):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))]
    monkeypatch.setattr(socket, "getaddrinfo", two_addresses)
    with pytest.raises(ssrf.Refused, match=r"rebind\.example \(resolves to 10\.1\.2\.3\) is a private address"):
        ssrf.checked_addresses("rebind.example", 80)


def test_the_checked_address_is_the_one_connected_to(site, local_allowed, monkeypatch):
    # Resolution happens once; the connection goes to that address while Host keeps the name.
    calls = []
    real = socket.getaddrinfo

    def counting(host, *args, **kwargs):
        calls.append(host)
        return real("127.0.0.1", *args, **kwargs)
    monkeypatch.setattr(socket, "getaddrinfo", counting)
    answer = fetch_url(f"http://hub-test.invalid:{site.port}/echo", "POST", {}, b"x")
    assert calls.count("hub-test.invalid") == 1
    assert json.loads(answer["body"])["host"] == f"hub-test.invalid:{site.port}"


def test_public_addresses_pass_the_guard():
    for address in ("93.184.215.14", "2606:4700::1111", "8.8.8.8"):
        assert ssrf.why_blocked(ipaddress.ip_address(address)) is None
    assert ssrf.checked_addresses("8.8.8.8", 443) == [ipaddress.ip_address("8.8.8.8")]


def test_tunnelled_private_addresses_are_refused():
    for address in ("::ffff:10.0.0.1", "2002:c0a8:0101::1", "64:ff9b::a00:1"):
        assert ssrf.why_blocked(ipaddress.ip_address(address)) is not None

"""The async host members (services/host/async_fetch.py, async_llm.py) and the async host bridge, run
as an async chain run would (AsyncHostBridge.answer through run_chain_async on the process's engines),
against real loopback servers: the same rules and answers as the sync members, secrets put in and
redacted, the database's members on a host thread, and many waiting calls on one loop without a
thread each."""

import asyncio
import json
import socket
import threading
import time
from dataclasses import replace

import pytest

from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.async_chain import run_chain_async
from plugins_app.runtime.web.async_tier import closing
from plugins_app.runtime.web.chain import Handler, HostError
from plugins_app.services.engine.tier import engine_key, get_async_tier, get_tier
from plugins_app.services.execution.async_host_bridge import ASYNC_MEMBERS, AsyncHostBridge
from plugins_app.services.execution.chain_cache import chain_cache
from plugins_app.services.execution.host_bridge import MEMBERS
from plugins_app.services.host import llm as sync_llm
from plugins_app.services.host.async_fetch import fetch_url_async
from plugins_app.services.host.async_llm import complete_async
from plugins_app.services.host.fetch import fetch_url
from plugins_app.services.secrets import store

from ..conftest import PROMPT
from .stubs import LLMStub, StubServer, json_answer, reporter

VALUE = "tok-3a9f1c7e5d2b8a6f4e0c"


def _site(req):
    if req.path.startswith("/echo"):
        return json_answer(201, {"method": req.method, "path": req.path, "body": req.body.decode(),
                                 "auth": req.headers.get("Authorization"), "host": req.headers.get("Host")})
    if req.path == "/redirect":
        return 302, {"Location": "http://169.254.169.254/latest/meta-data/"}, b""
    if req.path == "/big":
        return 200, {"Content-Type": "text/plain"}, b"x" * 5000
    if req.path == "/slow":
        time.sleep(3)
        return 200, {}, b"late"
    return 404, {"Content-Type": "text/plain; charset=utf-8", "X-Multi": "a"}, "missing ✓".encode()


@pytest.fixture
def site():
    server = StubServer(_site)
    yield server
    server.close()


@pytest.fixture
def local_allowed(settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)


def run_async(account, hook="systemPrompt", context=PROMPT, **bridge_options):
    """The account's chain for `hook`, run as the async path runs it; (result, bridge)."""
    handlers = chain_cache.handlers(account, hook)
    spec = HOOKS[hook]

    async def main():
        bridge = AsyncHostBridge(account, spec, dict(context), **bridge_options)
        result = await run_chain_async(get_async_tier(), engine_key(account), spec, handlers, dict(context),
                                       host=bridge.answer)
        await get_async_tier().aclose()
        return result, bridge
    result, bridge = asyncio.run(main())
    bridge.secrets.scrub(result, handlers)
    return result, bridge


def reported(result):
    return json.loads(result.value)


def test_the_network_members_have_async_implementations():
    assert {"fetch", "llm", "decide"} <= set(ASYNC_MEMBERS)
    assert not {"agents.list", "workspace.read", "session.peer.send", "ssh.command"} & set(ASYNC_MEMBERS)


# -- host.fetch: the sync one's rules ---------------------------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize(("method", "headers", "body"), [
    ("POST", {"X-Token": "abc", "Authorization": "Bearer x"}, "payload"),
    ("POST", {}, None),
    ("GET", {"Accept": "text/plain", "Accept-Encoding": "gzip"}, None),
    ("DELETE", {"user-agent": "mine"}, None),
])
def test_the_async_fetch_sends_and_answers_as_the_sync_one(site, local_allowed, method, headers, body):
    args = (f"{site.url}/echo?q=1", method, headers, body)
    sync_answer = fetch_url(*args)
    async_answer = asyncio.run(fetch_url_async(*args))
    ignored = {"date"}   # when the server answered
    assert {k: v for k, v in async_answer["headers"].items() if k not in ignored} == \
        {k: v for k, v in sync_answer["headers"].items() if k not in ignored}
    assert (async_answer["status"], async_answer["body"]) == (sync_answer["status"], sync_answer["body"])
    first, second = site.requests
    # The same request on the wire: method, target, body, and the same headers (none of httpx's own).
    assert (second.method, second.path, second.body) == (first.method, first.path, first.body) == \
        (method, "/echo?q=1", (body or "").encode())
    assert second.headers == first.headers
    assert json.loads(async_answer["body"])["host"] == f"127.0.0.1:{site.port}"


@pytest.mark.django_db
def test_a_non_2xx_answer_is_a_result_with_its_charset_and_repeated_headers(site, local_allowed):
    answer = asyncio.run(fetch_url_async(f"{site.url}/nothing-here"))
    assert (answer["status"], answer["body"], answer["headers"]["x-multi"]) == (404, "missing ✓", "a")
    assert answer == fetch_url(f"{site.url}/nothing-here") | {"headers": answer["headers"]}


@pytest.mark.django_db
def test_redirects_are_returned_not_followed(site, local_allowed):
    answer = asyncio.run(fetch_url_async(f"{site.url}/redirect"))
    assert answer["status"] == 302
    assert answer["headers"]["location"] == "http://169.254.169.254/latest/meta-data/"
    assert [r.path for r in site.requests] == ["/redirect"]


@pytest.mark.django_db
def test_a_response_over_the_cap_is_refused(site, local_allowed, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_max_bytes=4096)
    with pytest.raises(HostError, match="over 4096 bytes"):
        asyncio.run(fetch_url_async(f"{site.url}/big"))
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_max_bytes=5000)
    assert len(asyncio.run(fetch_url_async(f"{site.url}/big"))["body"]) == 5000


@pytest.mark.django_db
def test_a_slow_server_times_out(site, local_allowed, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_timeout_seconds=1)
    started = time.monotonic()
    with pytest.raises(HostError, match="timed out|time limit"):
        asyncio.run(fetch_url_async(f"{site.url}/slow"))
    assert time.monotonic() - started < 2.9   # gave up before the server answered


def test_no_proxy_from_the_environment_is_used(site, local_allowed, monkeypatch, db):
    # A proxy variable pointing nowhere: the request still goes straight to the checked address.
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    assert asyncio.run(fetch_url_async(f"{site.url}/echo"))["status"] == 201


@pytest.mark.parametrize("url", [
    "http://localhost:{port}/echo", "http://127.0.0.1:{port}/echo", "http://[::1]:{port}/echo",
    "http://2130706433:{port}/echo", "http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/", "http://0.0.0.0:{port}/", "file:///etc/passwd", "http://user:pw@example.com/",
    "http://example.com:99999/",
])
def test_the_guard_refuses_what_the_sync_one_refuses_with_the_same_words(site, url):
    url = url.format(port=site.port)
    with pytest.raises(HostError) as sync_refusal:
        fetch_url(url)
    with pytest.raises(HostError) as async_refusal:
        asyncio.run(fetch_url_async(url))
    assert str(async_refusal.value) == str(sync_refusal.value)
    assert site.requests == []


@pytest.mark.django_db
def test_the_checked_address_is_the_one_connected_to(site, local_allowed, monkeypatch):
    calls = []
    real = socket.getaddrinfo

    def counting(host, *args, **kwargs):
        calls.append(host)
        return real("127.0.0.1", *args, **kwargs)
    monkeypatch.setattr(socket, "getaddrinfo", counting)
    answer = asyncio.run(fetch_url_async(f"http://hub-test.invalid:{site.port}/echo", "POST", {}, b"x"))
    assert calls.count("hub-test.invalid") == 1
    assert json.loads(answer["body"])["host"] == f"hub-test.invalid:{site.port}"


# -- through the async bridge: grants, secrets, stand-ins, threads -----------------------------------

def fetcher(url, init="{headers: {Authorization: 'Bearer {{secret.TOKEN}}'}}"):
    return reporter("systemPrompt", f"host.fetch({url!r}, {init}).then(async (r) => "
                                    "({status: r.status, data: await r.json()}))")


@pytest.mark.django_db(transaction=True)   # the secrets are read on another thread: committed rows
def test_a_granted_secret_is_put_in_and_the_echo_redacted(account, install, site, local_allowed):
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=[f"http://127.0.0.1:{site.port}"])
    install(fetcher(f"{site.url}/echo/{{{{secret.TOKEN}}}}",
                    "{method: 'POST', headers: {Authorization: 'Bearer {{secret.TOKEN}}'}, body: '{{secret.TOKEN}}'}"),
            grant=["host:fetch", "secret:TOKEN"])
    result, _ = run_async(account)
    [request] = site.requests
    assert request.headers["Authorization"] == f"Bearer {VALUE}"
    assert request.path == f"/echo/{VALUE}" and request.body == VALUE.encode()
    got = reported(result)["ok"]["data"]
    assert got == {"method": "POST", "path": "/echo/[secret TOKEN]", "body": "[secret TOKEN]",
                   "auth": "Bearer [secret TOKEN]", "host": f"127.0.0.1:{site.port}"}
    assert VALUE not in json.dumps(result.value)


@pytest.mark.django_db(transaction=True)
def test_a_secret_for_another_host_is_refused_as_the_sync_one_refuses_it(account, install, site, local_allowed):
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["api.example.com"])
    install(fetcher(f"{site.url}/echo"), grant=["host:fetch", "secret:TOKEN"])
    result, _ = run_async(account)
    assert site.requests == []
    assert reported(result)["error"] == (
        "host.fetch refused: secret TOKEN may only be sent to its allowedHosts (api.example.com; a bare host is "
        f"https on port 443), and http://127.0.0.1:{site.port} is not one of them; nothing was sent")


@pytest.mark.django_db(transaction=True)
def test_an_ungranted_member_is_refused_with_the_sync_bridges_words(account, install, site):
    install(reporter("systemPrompt", f"host.fetch('{site.url}/echo')"), name="nosy", grant=[])
    result, _ = run_async(account)
    assert reported(result)["error"] == ("host.fetch needs the host:fetch permission, which an account admin "
                                         "has not granted to nosy")
    assert site.requests == []


@pytest.mark.django_db(transaction=True)
def test_a_dry_run_answers_from_the_stand_in_and_lists_the_call(account, install, site, local_allowed):
    install(reporter("systemPrompt", f"host.fetch('{site.url}/echo', {{method: 'POST'}}).then((r) => r.status)"),
            grant=["host:fetch"])
    result, bridge = run_async(account, dry_run=True, record=False)
    assert reported(result) == {"ok": 0}
    assert [c["member"] for c in bridge.would_call] == ["host.fetch"] and site.requests == []


@pytest.mark.django_db(transaction=True)
def test_a_database_member_runs_on_a_host_thread(account, install, monkeypatch):
    threads = []
    real = MEMBERS["agents.list"]

    def recording(call, args):
        threads.append(threading.current_thread().name)
        return real(call, args)
    monkeypatch.setitem(MEMBERS, "agents.list", recording)
    install(reporter("systemPrompt", "host.agents.list()"), grant=["host:agents"])
    result, _ = run_async(account)
    assert reported(result) == {"ok": {"agents": []}}
    assert len(threads) == 1 and threads[0].startswith("host-member")


# -- host.llm and host.decide -------------------------------------------------------------------------

@pytest.fixture
def llm_server(settings):
    answers = {"text": "The sky is blue. sk-test"}
    server = LLMStub(lambda body: answers["text"])
    server.answers = answers
    settings.HUB_HOST = replace(settings.HUB_HOST, llm_base_url=server.url + "/v1/", llm_api_key="sk-test",
                                llm_model="tiny-model")
    yield server
    server.close()


def test_the_async_llm_asks_and_answers_as_the_sync_one(llm_server):
    messages = [{"role": "user", "content": "What colour is the sky?"}]
    assert asyncio.run(complete_async(messages, {"temperature": 0.2})) == \
        sync_llm.complete(messages, {"temperature": 0.2}) == "The sky is blue. [secret LLM_API_KEY]"
    first, second = llm_server.requests
    assert second.json() == first.json() == {"temperature": 0.2, "model": "tiny-model", "messages": messages}
    assert second.headers["Authorization"] == first.headers["Authorization"] == "Bearer sk-test"
    assert second.path == first.path == "/v1/chat/completions"


@pytest.mark.django_db(transaction=True)
def test_decide_through_the_async_bridge(account, install, llm_server):
    llm_server.answers["text"] = "Reject."
    install(reporter("systemPrompt", "host.decide('Is this spam?', ['accept', 'reject'])"), grant=["host:decide"])
    result, _ = run_async(account)
    assert reported(result) == {"ok": "reject"}
    sent = llm_server.requests[0].json()
    assert sent["temperature"] == 0 and "- accept\n- reject" in sent["messages"][1]["content"]


def test_an_llm_error_reads_as_the_sync_ones(settings):
    server = StubServer(lambda req: json_answer(429, {"error": {"message": "slow down, sk-test"}}))
    settings.HUB_HOST = replace(settings.HUB_HOST, llm_base_url=server.url, llm_api_key="sk-test", llm_model="m")
    try:
        messages = [{"role": "user", "content": "hi"}]
        with pytest.raises(HostError) as sync_error:
            sync_llm.complete(messages)
        with pytest.raises(HostError) as async_error:
            asyncio.run(complete_async(messages))
    finally:
        server.close()
    assert str(async_error.value) == str(sync_error.value) == \
        "host.llm: the LLM endpoint answered HTTP 429: slow down, [secret LLM_API_KEY]"


def test_an_unconfigured_llm_is_refused(settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, llm_base_url="", llm_model="")
    with pytest.raises(HostError, match="no LLM endpoint is configured"):
        asyncio.run(complete_async([{"role": "user", "content": "hi"}]))


# -- many waiting calls, one loop, few threads -------------------------------------------------------

CALLS = 200
DELAY = 0.05


def test_200_calls_waiting_on_a_slow_fetch_hold_no_thread_each(settings):
    # Each chain awaits a loopback server that answers after DELAY: 200 of them on one event loop,
    # their engine links and fetches all in flight on it, cost no thread per call.
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)
    tier = get_tier()

    async def main():
        async def answer(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(DELAY)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n"
                         b"Connection: close\r\n\r\n{\"ok\":true}")
            await writer.drain()
            writer.close()
        server = await asyncio.start_server(answer, "127.0.0.1", 0, backlog=CALLS)
        port = server.sockets[0].getsockname()[1]
        compiled = await asyncio.to_thread(tier.compile, (
            f"globalThis.middleware.userMessageInbound = async (c, tools) => {{"
            f" const r = await host.fetch('http://127.0.0.1:{port}/check');"
            f" return (await r.json()).ok ? c.text + ' checked' : tools.cancel('blocked'); }};"), "javascript")
        handler = Handler("1", "checker", "async-many-1", compiled["code"], granted=frozenset({"host:fetch"}))
        spec = HOOKS["userMessageInbound"]
        context = {"sessionId": "1", "channelId": None, "text": "hi", "mediaIds": []}
        baseline, most, done = threading.active_count(), [0], asyncio.Event()

        async def count_threads():
            while not done.is_set():
                most[0] = max(most[0], threading.active_count())
                await asyncio.sleep(0.01)

        async def one(i):
            bridge = AsyncHostBridge(None, spec, dict(context))
            return await run_chain_async(get_async_tier(), f"async-many-{i}", spec, [handler], dict(context),
                                         host=bridge.answer)
        counter = asyncio.create_task(count_threads())
        async with server, closing(get_async_tier()):
            results = await asyncio.gather(*(one(i) for i in range(CALLS)))
        done.set()
        await counter
        return results, baseline, most[0]
    results, baseline, most = asyncio.run(main())
    assert [r.value for r in results] == ["hi checked"] * CALLS, {r.trace[0].warning for r in results}
    assert most - baseline < 10, (baseline, most)   # not one thread per waiting call


@pytest.mark.django_db(transaction=True)
def test_a_chain_nested_in_a_host_call_runs_on_a_private_engine(account, install):
    # host.session.peer.send runs interAgentMessage's chain from its host thread: on a private engine
    # (Tier.nested()), never waiting on the engine its caller's chain holds.
    install(reporter("systemPrompt", "host.session.peer.send('555', 'status?')"), name="asker",
            grant=["host:session"])
    install("globalThis.middleware.interAgentMessage = async (c) => `[to ${c.targetSessionId}] ${c.text}`;",
            name="tagger")
    result, bridge = run_async(account, hop=1, turn_id="turn-9")
    assert [t.status for t in result.trace] == ["ran"], [t.warning for t in result.trace]
    assert reported(result) == {"ok": {"delivered": True, "text": "[to 555] status?"}}
    assert [(e["type"], e["hop"], e["text"]) for e in bridge.effects] == [("peerMessage", 2, "[to 555] status?")]
    assert get_tier().private_count >= 1   # the nested chain's engine, kept idle for the next one


@pytest.mark.django_db(transaction=True)
def test_calls_on_host_threads_take_turns_within_a_run(account, install, monkeypatch):
    # Fired together, the database's members of one run still run one at a time, in the order called.
    running, most, order = [0], [0], []
    real = MEMBERS["agents.list"]

    def slow(call, args):
        running[0] += 1
        most[0] = max(most[0], running[0])
        order.append(call.call_number)
        time.sleep(0.05)
        running[0] -= 1
        return real(call, args)
    monkeypatch.setitem(MEMBERS, "agents.list", slow)
    install(reporter("systemPrompt", "Promise.all([1, 2, 3].map(() => host.agents.list())).then((a) => a.length)"),
            grant=["host:agents"])
    result, _ = run_async(account)
    assert reported(result) == {"ok": 3}
    assert most[0] == 1 and order == [1, 2, 3]


# -- https: the connection goes to the checked address, the certificate is checked for the URL's name --

def _certificate(tmp_path, name):
    """A self-signed certificate for `name` (its own authority) and its key, as PEM files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture
def tls_site(tmp_path, monkeypatch, settings):
    import ssl

    from plugins_app.services.host import async_fetch

    name = "hub-test.invalid"
    cert_file, key_file = _certificate(tmp_path, name)
    server = StubServer(_site)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert_file, key_file)
    server.server.socket = served.wrap_socket(server.server.socket, server_side=True)
    trusted = ssl.create_default_context(cafile=str(cert_file))   # our authority, instead of the system's
    monkeypatch.setattr(async_fetch, "_tls", lambda: trusted)
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **kw: real("127.0.0.1" if host == name else host, *a, **kw))
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)
    yield server, name
    server.close()


def test_https_is_verified_for_the_urls_name_on_the_checked_address(tls_site, db):
    server, name = tls_site
    answer = asyncio.run(fetch_url_async(f"https://{name}:{server.port}/echo"))
    assert answer["status"] == 201
    assert json.loads(answer["body"])["host"] == f"{name}:{server.port}"
    # The same server reached by its address: the certificate does not name it, and nothing is sent.
    with pytest.raises(HostError, match="CERTIFICATE_VERIFY_FAILED|certificate|hostname"):
        asyncio.run(fetch_url_async(f"https://127.0.0.1:{server.port}/echo"))
    assert [r.path for r in server.requests] == ["/echo"]


@pytest.mark.django_db
def test_a_header_http_cannot_carry_is_refused_before_connecting_and_latin1_is_sent_as_the_sync_one_sends_it(
        site, local_allowed):
    with pytest.raises(HostError, match="not valid HTTP.*nothing was sent"):
        asyncio.run(fetch_url_async(f"{site.url}/echo", "GET", {"X-Note": "a\r\nInjected: yes"}))
    with pytest.raises(HostError, match="not valid HTTP"):
        asyncio.run(fetch_url_async(f"{site.url}/echo", "GET", {"X-Note": "snow ☃"}))
    assert site.requests == []
    args = (f"{site.url}/echo", "GET", {"X-Note": "café"}, None)
    assert fetch_url(*args)["status"] == asyncio.run(fetch_url_async(*args))["status"] == 201
    first, second = site.requests
    assert second.headers["X-Note"] == first.headers["X-Note"]


def test_the_async_llm_keeps_its_connection_to_the_endpoint_between_calls(settings):
    # An endpoint that keeps connections open (HTTP/1.1, as providers do): three calls on one event loop
    # reach it over one connection, so a provider over TLS is shaken hands with once, not per call.
    connections = []
    server = StubServer(lambda req: json_answer(200, {"choices": [{"message": {"content": "fine"}}]}))
    handler = server.server.RequestHandlerClass
    handler.protocol_version = "HTTP/1.1"
    handler.setup = lambda self, setup=handler.setup: (connections.append(self.client_address), setup(self))[1]
    settings.HUB_HOST = replace(settings.HUB_HOST, llm_base_url=server.url, llm_api_key="sk-test", llm_model="m")

    async def three_calls():
        return [await complete_async([{"role": "user", "content": f"call {i}"}]) for i in range(3)]
    try:
        assert asyncio.run(three_calls()) == ["fine"] * 3
        assert len(server.requests) == 3
        assert len(connections) == 1
    finally:
        server.close()

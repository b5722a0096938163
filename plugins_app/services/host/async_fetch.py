"""host.fetch for async runs: fetch.py's rules (the SSRF guard on every resolved address, the
connection pinned to a checked one, no redirects followed, no proxies, the time and size caps, granted
secrets put in after the guard and redacted from the answer) over httpx, with no thread held while it
waits. The pure parts are fetch.py's own; only the I/O is here."""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Awaitable, Callable

import httpx
from django.conf import settings

from plugins_app.runtime.web.chain import HostError
from plugins_app.services.execution.async_host_bridge import async_member, in_host_thread
from plugins_app.services.execution.host_bridge import HostCall
from plugins_app.services.host import fetch as sync_fetch
from plugins_app.services.host import ssrf
from plugins_app.services.host.outbound import CHUNK
from plugins_app.services.secrets.hosts import Target

# As fetch.Injector, awaited: the secrets are read from the database on a host thread (the request's own,
# served by WSGI: see async_host_bridge.in_host_thread).
AsyncInjector = Callable[[Target, str, dict, str | None], Awaitable[tuple[str, dict, str | None]]]
# httpx's own defaults, which http.client does not send; the plugin's headers, Host and
# Accept-Encoding: identity (as http.client sends it) go instead.
_CLIENT_DEFAULTS = ("accept", "accept-encoding", "connection", "user-agent")


@functools.lru_cache(maxsize=1)
def system_trust() -> ssl.SSLContext:
    """The system's trust store, as fetch.py's ssl.create_default_context() (not certifi's): made once."""
    return ssl.create_default_context()


def _tls() -> ssl.SSLContext:
    """What host.fetch trusts over https (a test puts its own authority here)."""
    return system_trust()


def _client() -> httpx.AsyncClient:
    """A client for one request: no proxies from the environment, no redirects, no connection kept
    (each fetch connects to the address it checked, as the sync one does)."""
    # The one context made at start, for http too (unused there): `verify=False` has httpx build an
    # SSLContext for every client, a quarter of a fetch's samples in a web worker (py-spy, bench/io.py).
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(verify=_tls(), trust_env=False,
                                           limits=httpx.Limits(max_keepalive_connections=0)),
        trust_env=False, follow_redirects=False)


async def fetch_url_async(url: str, method: str = "GET", headers: dict | None = None, body: str | bytes | None = None,
                          inject: AsyncInjector | None = None) -> dict:
    """fetch.fetch_url, awaited: one request under the SSRF guard; returns {status, headers, body}."""
    parts, hostname, port, target = sync_fetch.parse_url(url)
    try:
        addresses = await ssrf.checked_addresses_async(hostname, port,
                                                       allow_private=settings.HUB_HOST.fetch_allow_private)
    except ssrf.Refused as exc:
        raise sync_fetch.refused(exc) from None
    headers = headers or {}
    if inject is not None:   # after the guard, for the very host name it resolved and we connect to
        target, headers, body = await inject(Target(parts.scheme, hostname, port), target, headers,
                                             sync_fetch.text_body(body))
    payload = sync_fetch.payload_of(body)
    deadline = time.monotonic() + sync_fetch.time_limit()   # as the sync fetch's: from here, before connecting
    async with _client() as client:
        return await _exchange(client, parts.scheme, hostname, port, target, method, headers, payload,
                               addresses, deadline)


async def _exchange(client: httpx.AsyncClient, scheme: str, hostname: str, port: int, target: str, method: str,
                    headers: dict, payload: bytes | None, addresses: list[ssrf.IPAddress], deadline: float) -> dict:
    response = await _connected(client, scheme, hostname, port, target, method, headers, payload, addresses, deadline)
    try:
        raw = b"" if method == "HEAD" else await _read_body(response, hostname, deadline)
    finally:
        await response.aclose()
    return sync_fetch.answer_of(response.status_code, ((k.decode("latin-1"), v.decode("latin-1"))
                                                       for k, v in response.headers.raw), raw)


async def _connected(client: httpx.AsyncClient, scheme: str, hostname: str, port: int, target: str, method: str,
                     headers: dict, payload: bytes | None, addresses: list[ssrf.IPAddress],
                     deadline: float) -> httpx.Response:
    """The response's head from the first checked address that takes the connection (as
    ssrf.connect_pinned): the URL names the address, Host and the TLS name are the URL's host."""
    last_error: Exception | None = None
    for ip in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        request = client.build_request(
            method, httpx.URL(scheme=scheme, host=str(ip), port=port, raw_path=target.encode()),
            headers=headers, content=payload,
            extensions={"sni_hostname": hostname, "timeout": httpx.Timeout(remaining).as_dict()})
        for name in _CLIENT_DEFAULTS:
            if name not in {h.lower() for h in headers}:
                del request.headers[name]
        request.headers["Host"] = sync_fetch.host_header(scheme, hostname, port)
        if "accept-encoding" not in {h.lower() for h in headers}:
            request.headers["Accept-Encoding"] = "identity"
        try:
            async with asyncio.timeout(remaining):
                return await client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:   # nothing sent: the next address
            last_error = exc
        except TimeoutError:
            raise HostError(f"host.fetch: {hostname} failed: timed out") from None
        except (httpx.TransportError, OSError) as exc:
            kind = "timed out" if isinstance(exc, httpx.TimeoutException) else f"{type(exc).__name__}: {exc}"
            raise HostError(f"host.fetch: {hostname} failed: {kind}") from None
    shown = "timed out" if last_error is None or isinstance(last_error, httpx.ConnectTimeout) else str(last_error)
    raise HostError(f"host.fetch: could not connect to {hostname}:{port}: {shown}")


async def _read_body(response: httpx.Response, hostname: str, deadline: float) -> bytes:
    """The body as sent (no content decoding, as http.client reads it), capped in size and time."""
    limit = settings.HUB_HOST.fetch_max_bytes
    chunks: list[bytes] = []
    total = 0
    try:
        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
            async for chunk in response.aiter_raw(CHUNK):
                total += len(chunk)
                if total > limit:
                    raise HostError(f"host.fetch: the response body is over {limit} bytes (HUB_FETCH_MAX_BYTES)")
                chunks.append(chunk)
    except TimeoutError:
        raise HostError("host.fetch: the response did not arrive within the time limit") from None
    except (httpx.TransportError, OSError) as exc:
        kind = "timed out" if isinstance(exc, httpx.TimeoutException) else f"{type(exc).__name__}: {exc}"
        raise HostError(f"host.fetch: {hostname} failed: {kind}") from None
    return b"".join(chunks)


def _secret_injector(call: HostCall, names: list[str]) -> AsyncInjector:
    async def inject(where: Target, target: str, headers: dict, body: str | None) -> tuple[str, dict, str | None]:
        values = await in_host_thread(call.secrets.for_request, "host.fetch", call.handler, names, where)
        return sync_fetch.with_secrets(values, target, headers, body)
    return inject


def _knows_secrets(call: HostCall) -> bool:
    """Whether the handler was granted any secret (its redactor then reads them from the database)."""
    return any(p.startswith("secret:") for p in call.handler.granted)


@async_member("fetch")
async def fetch(call: HostCall, args: list) -> dict:
    url, method, headers, body, names = sync_fetch.planned(args)
    # Knows every secret granted to this handler (none: it changes nothing, at no cost).
    if _knows_secrets(call):
        redactor = await in_host_thread(call.secrets.redactor_for, [call.handler])
    else:
        redactor = call.secrets.redactor_for([call.handler])
    try:
        answer = await fetch_url_async(url, method, headers, body,
                                       inject=_secret_injector(call, names) if names else None)
    except HostError as exc:   # an error message may quote what was sent
        raise HostError(redactor.text(str(exc))) from None
    # The one redaction step where the answer enters the plugin: a server echoing the token back
    # hands the plugin `[secret NAME]`, so the value never reaches the isolate.
    return redactor.data(answer)

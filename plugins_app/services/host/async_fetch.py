"""host.fetch for async runs: fetch.py's rules (the SSRF guard on every resolved address, the
connection pinned to a checked one, no redirects followed, no proxies, the time and size caps, granted
secrets put in after the guard and redacted from the answer), with no thread held while it waits. The
pure parts are fetch.py's own; only the I/O is here: one connection per fetch, asyncio's streams, and
h11 (the HTTP/1.1 state machine httpx's own transport runs on) for the bytes on the wire.

Why not httpx itself: a fetch built a client, a transport and a connection pool, each to be thrown away
(no connection outlives the fetch: the next one must connect to the address it checked), and went through
anyio's and the pool's layers for one request. That was a fifth of a web worker's CPU under
`bench/io.py`; the same exchange over h11 is a few calls."""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Awaitable, Callable

import h11
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
# http.client sends Content-Length: 0 for these methods without a body (the sync fetch's wire request).
_EXPECTING_BODY = {"PATCH", "POST", "PUT"}


@functools.lru_cache(maxsize=1)
def system_trust() -> ssl.SSLContext:
    """The system's trust store, as fetch.py's ssl.create_default_context() (not certifi's): made once."""
    return ssl.create_default_context()


def _tls() -> ssl.SSLContext:
    """What host.fetch trusts over https (a test puts its own authority here)."""
    return system_trust()


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
    request = _request(parts.scheme, hostname, port, target, method, headers, payload)
    reader, writer = await _connected(parts.scheme, hostname, port, addresses, deadline)
    try:
        return await _exchange(reader, writer, request, payload, hostname, method, deadline)
    finally:
        writer.transport.abort()   # never kept: the next fetch connects to the address it checks


def _request(scheme: str, hostname: str, port: int, target: str, method: str, headers: dict,
             payload: bytes | None) -> h11.Request:
    """The request's head, checked before anything connects: the plugin's headers as http.client sends
    them, then Host (always the URL's), Accept-Encoding: identity unless the plugin chose one, and the
    body's length."""
    given = {name.lower() for name in headers}
    pairs = [(name, value) for name, value in headers.items() if name.lower() != "host"]
    pairs.append(("Host", sync_fetch.host_header(scheme, hostname, port)))
    if "accept-encoding" not in given:
        pairs.append(("Accept-Encoding", "identity"))
    if "content-length" not in given and "transfer-encoding" not in given:
        if payload is not None:
            pairs.append(("Content-Length", str(len(payload))))
        elif method.upper() in _EXPECTING_BODY:
            pairs.append(("Content-Length", "0"))
    try:   # values in Latin-1, as http.client encodes them
        return h11.Request(method=method, target=target,
                           headers=[(name, value.encode("latin-1")) for name, value in pairs])
    except (h11.LocalProtocolError, ValueError) as exc:   # a line break, or a character Latin-1 lacks
        raise HostError(f"host.fetch: the request is not valid HTTP ({exc}); nothing was sent") from None


async def _connected(scheme: str, hostname: str, port: int, addresses: list[ssrf.IPAddress],
                     deadline: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the first checked address that takes it (as ssrf.connect_pinned): TLS checks
    the certificate against the URL's host name, whatever address was connected to."""
    last_error: Exception | None = None
    for ip in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            async with asyncio.timeout(remaining):
                if scheme == "https":
                    return await asyncio.open_connection(str(ip), port, ssl=_tls(), server_hostname=hostname)
                return await asyncio.open_connection(str(ip), port)
        except TimeoutError:
            last_error = None
            break
        except OSError as exc:   # nothing sent (a refused connection, a certificate): the next address
            last_error = exc
    shown = "timed out" if last_error is None else str(last_error)
    raise HostError(f"host.fetch: could not connect to {hostname}:{port}: {shown}")


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: h11.Request,
                    payload: bytes | None, hostname: str, method: str, deadline: float) -> dict:
    conn = h11.Connection(h11.CLIENT)
    try:
        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
            writer.write(conn.send(request))
            if payload:
                writer.write(conn.send(h11.Data(data=payload)))
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
            head = await _next(conn, reader)
            while isinstance(head, h11.InformationalResponse):   # 1xx: the answer is still to come
                head = await _next(conn, reader)
    except TimeoutError:
        raise HostError(f"host.fetch: {hostname} failed: timed out") from None
    except (OSError, h11.ProtocolError) as exc:
        raise HostError(f"host.fetch: {hostname} failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(head, h11.Response):
        raise HostError(f"host.fetch: {hostname} failed: the connection closed before an answer")
    raw = b"" if method == "HEAD" else await _read_body(conn, reader, hostname, deadline)
    return sync_fetch.answer_of(head.status_code, ((k.decode("latin-1"), v.decode("latin-1"))
                                                   for k, v in head.headers.raw_items()), raw)


async def _next(conn: h11.Connection, reader: asyncio.StreamReader) -> object:
    """The connection's next event, reading as h11 needs (an empty read is the server's close)."""
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(await reader.read(CHUNK))


async def _read_body(conn: h11.Connection, reader: asyncio.StreamReader, hostname: str, deadline: float) -> bytes:
    """The body as sent (no content decoding, as http.client reads it), capped in size and time."""
    limit = settings.HUB_HOST.fetch_max_bytes
    chunks: list[bytes] = []
    total = 0
    try:
        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
            while True:
                event = await _next(conn, reader)
                if isinstance(event, h11.Data):
                    total += len(event.data)
                    if total > limit:
                        raise HostError(f"host.fetch: the response body is over {limit} bytes (HUB_FETCH_MAX_BYTES)")
                    chunks.append(bytes(event.data))
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    break
    except TimeoutError:
        raise HostError("host.fetch: the response did not arrive within the time limit") from None
    except (OSError, h11.ProtocolError) as exc:
        raise HostError(f"host.fetch: {hostname} failed: {type(exc).__name__}: {exc}") from None
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

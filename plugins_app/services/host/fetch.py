"""host.fetch: a real HTTP request to a public address, size- and time-capped, redirects not followed."""

from __future__ import annotations

import http.client
import ssl
import time
from collections.abc import Callable
from urllib.parse import quote, urlsplit

from django.conf import settings

from plugins_app.runtime.tables.permissions import secret_names
from plugins_app.runtime.web.chain import HostError
from plugins_app.services.execution.host_bridge import HostCall, member
from plugins_app.services.host import ssrf
from plugins_app.services.secrets.egress import substitute
from plugins_app.services.secrets.hosts import Target

METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
MAX_REQUEST_BODY = 1024 * 1024
MAX_URL_CHARS = 8192
CHUNK = 64 * 1024
# Set by the hub from the address it checked; a plugin may not override them.
RESERVED_HEADERS = {"host", "content-length", "transfer-encoding", "connection"}


def _request_parts(args: list) -> tuple[str, str, dict, str | None]:
    url = args[0] if args else None
    init = args[1] if len(args) > 1 and args[1] is not None else {}
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise HostError(f"host.fetch: expected a URL of at most {MAX_URL_CHARS} characters")
    if not isinstance(init, dict):
        raise HostError("host.fetch: init must be an object {method, headers, body}")
    method = init.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise HostError(f"host.fetch: method must be one of {', '.join(sorted(METHODS))}")
    headers = init.get("headers") or {}
    if isinstance(headers, list):
        headers = dict(pair for pair in headers if isinstance(pair, list) and len(pair) == 2)
    if not isinstance(headers, dict):
        raise HostError("host.fetch: headers must be an object of strings")
    clean = {}
    for name, value in headers.items():
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise HostError(f"host.fetch: header {name!r} must be a string")
        value = str(value)
        if any(c in name + value for c in "\r\n\0") or not name.strip():
            raise HostError(f"host.fetch: header {name!r} is malformed")
        if name.lower() not in RESERVED_HEADERS:
            clean[name] = value
    body = init.get("body")
    if body is not None:
        if not isinstance(body, str):
            raise HostError("host.fetch: body must be a string (JSON.stringify objects first)")
        _check_body_size(body.encode())
    return url, method.upper(), clean, body


def _check_body_size(body: bytes) -> bytes:
    if len(body) > MAX_REQUEST_BODY:
        raise HostError("host.fetch: the request body is over 1 MiB")
    return body


# Called with where the request goes (scheme, the URL's host once the SSRF guard has resolved and checked
# it, port), and with the request's path and query, headers and body: answers them as they are to be sent
# (the secrets put in).
Injector = Callable[[Target, str, dict, str | None], tuple[str, dict, str | None]]


def _read_body(response, deadline: float, limit: int, sock) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HostError("host.fetch: the response did not arrive within the time limit")
        sock.settimeout(remaining)
        chunk = response.read1(CHUNK)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise HostError(f"host.fetch: the response body is over {limit} bytes (HUB_FETCH_MAX_BYTES)")
        chunks.append(chunk)


def _decode(raw: bytes, content_type: str) -> str:
    charset = "utf-8"
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip('"')
    try:
        return raw.decode(charset, errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


def fetch_url(url: str, method: str = "GET", headers: dict | None = None, body: str | bytes | None = None,
              inject: Injector | None = None) -> dict:
    """Perform one request under the SSRF guard; returns {status, headers, body}."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise HostError("host.fetch: only http:// and https:// URLs are allowed")
    if not parts.hostname:
        raise HostError("host.fetch: the URL has no host")
    if parts.username or parts.password:
        raise HostError("host.fetch: credentials in the URL are not allowed; send an Authorization header")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise HostError("host.fetch: the URL's port is not a number from 0 to 65535") from None
    try:
        addresses = ssrf.checked_addresses(parts.hostname, port, allow_private=settings.HUB_HOST.fetch_allow_private)
    except ssrf.Refused as exc:
        raise HostError(f"host.fetch refused: {exc}") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = headers or {}
    if inject is not None:   # after the guard, for the very host name it resolved and we connect to
        target, headers, body = inject(Target(parts.scheme, parts.hostname, port), target, headers,
                                       body.decode() if isinstance(body, bytes) else body)
    payload = _check_body_size(body.encode() if isinstance(body, str) else body) if body is not None else None
    deadline = time.monotonic() + min(settings.HUB_HOST.fetch_timeout_seconds, 5.0)
    context = ssl.create_default_context() if parts.scheme == "https" else None
    try:
        conn = ssrf.connect_pinned(parts.scheme, parts.hostname, port, addresses, deadline, context)
    except OSError as exc:
        raise HostError(f"host.fetch: could not connect to {parts.hostname}:{port}: {exc}") from None
    sock = conn.sock   # kept: http.client drops conn.sock when the server closes after the response
    try:
        conn.request(method, target, body=payload, headers=headers)
        response = conn.getresponse()
        raw = b"" if method == "HEAD" else _read_body(response, deadline, settings.HUB_HOST.fetch_max_bytes, sock)
    except (OSError, http.client.HTTPException) as exc:
        kind = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
        raise HostError(f"host.fetch: {parts.hostname} failed: {kind}") from None
    finally:
        conn.close()
    merged: dict[str, str] = {}
    for name, value in response.getheaders():
        key = name.lower()
        merged[key] = f"{merged[key]}, {value}" if key in merged else value
    return {"status": response.status, "headers": merged,
            "body": _decode(raw, response.getheader("Content-Type") or "")}


def _secret_injector(call: HostCall, names: list[str]) -> Injector:
    def inject(where: Target, target: str, headers: dict, body: str | None):
        values = call.secrets.for_request("host.fetch", call.handler, names, where)
        headers = {name: substitute(value, values) for name, value in headers.items()}
        for name, value in headers.items():
            if any(c in value for c in "\r\n\0"):
                raise HostError(f"host.fetch: header {name!r} would hold a line break or NUL from a secret; "
                                "nothing was sent")
        # In the URL a value is percent-encoded, so it can't end the path or add a query parameter.
        return (substitute(target, values, lambda v: quote(v, safe="")), headers,
                None if body is None else substitute(body, values))
    return inject


# What a replay or shadow run answers instead of fetching: an empty answer, marked.
STAND_IN = {"dryRun": True, "status": 0, "headers": {}, "body": ""}
# Headers that make a GET act as another method on many servers: such a GET is no plain read.
METHOD_OVERRIDES = {"x-http-method-override", "x-http-method", "x-method-override"}


def _plain_read(args: list) -> bool:
    """A GET or HEAD with no body and no method override: what a replay's "live reads" may make."""
    _, method, headers, body = _request_parts(args)
    return (method in ("GET", "HEAD") and body is None
            and not any(name.lower() in METHOD_OVERRIDES for name in headers))


@member("fetch", writes=lambda args: _request_parts(args)[1] not in ("GET", "HEAD"), stand_in=STAND_IN,
        live_read=_plain_read)
def fetch(call: HostCall, args: list) -> dict:
    url, method, headers, body = _request_parts(args)
    names = secret_names("\n".join([url, *headers.values(), body or ""]))
    if names and secret_names(urlsplit(url).netloc):
        raise HostError("host.fetch: a secret can't go in the URL's host; put it in the path, the query, "
                        "a header or the body")
    # Knows every secret granted to this handler (none: it changes nothing, at no cost).
    redactor = call.secrets.redactor_for([call.handler])
    try:
        answer = fetch_url(url, method, headers, body, inject=_secret_injector(call, names) if names else None)
    except HostError as exc:   # an error message may quote what was sent
        raise HostError(redactor.text(str(exc))) from None
    # The one redaction step where the answer enters the plugin: a server echoing the token back
    # hands the plugin `[secret NAME]`, so the value never reaches the isolate.
    return redactor.data(answer)

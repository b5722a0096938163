"""An HTTP request as host.fetch sends it, with no Django: the hub's rules (methods, headers, sizes, the
URL's parts, an address check before connecting to exactly the addresses checked, no redirects followed, no
proxy however the environment is set, a deadline) shared by the hub's host.fetch and `hub dev`'s stand-in."""

from __future__ import annotations

import http.client
import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from plugins_app.runtime.web.chain import HostError
from plugins_app.services.host import ssrf
from plugins_app.services.secrets.hosts import Target

METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
MAX_REQUEST_BODY = 1024 * 1024
MAX_URL_CHARS = 8192
CHUNK = 64 * 1024
# Set by the hub from the address it checked; a plugin may not override them.
RESERVED_HEADERS = {"host", "content-length", "transfer-encoding", "connection"}


def request_parts(args: list) -> tuple[str, str, dict, str | None]:
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


@dataclass(frozen=True)
class Rules:
    """What one caller allows: the addresses a host name may resolve to (raises ssrf.Refused), the
    seconds a request may take and the bytes an answer may have."""

    check_addresses: Callable[[str, int], list[ssrf.IPAddress]]
    timeout_seconds: float
    max_bytes: int
    refused: str = "host.fetch refused"   # how a refusal starts


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


def parse_url(url: str) -> tuple[SplitResult, str, int, str]:
    """The URL's parts, host name, port and request target (path and query); HostError when it is
    not one host.fetch may ask for (the hub's fetch, sync and async, and `hub dev`'s alike)."""
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
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts, parts.hostname, port, target


def send(url: str, method: str, headers: dict | None, body: str | bytes | None, rules: Rules,
         inject: Injector | None = None) -> dict:
    """Perform one request to addresses `rules` allow; returns {status, headers, body}. http.client
    follows no redirect (a 30x is the answer) and reads no proxy variable."""
    parts, hostname, port, target = parse_url(url)
    try:
        addresses = rules.check_addresses(hostname, port)
    except ssrf.Refused as exc:
        raise HostError(f"{rules.refused}: {exc}") from None
    headers = headers or {}
    if inject is not None:   # after the guard, for the very host name it resolved and we connect to
        target, headers, body = inject(Target(parts.scheme, hostname, port), target, headers,
                                       body.decode() if isinstance(body, bytes) else body)
    payload = _check_body_size(body.encode() if isinstance(body, str) else body) if body is not None else None
    deadline = time.monotonic() + rules.timeout_seconds
    context = ssl.create_default_context() if parts.scheme == "https" else None
    try:
        conn = ssrf.connect_pinned(parts.scheme, hostname, port, addresses, deadline, context)
    except OSError as exc:
        raise HostError(f"host.fetch: could not connect to {hostname}:{port}: {exc}") from None
    sock = conn.sock   # kept: http.client drops conn.sock when the server closes after the response
    try:
        conn.request(method, target, body=payload, headers=headers)
        response = conn.getresponse()
        raw = b"" if method == "HEAD" else _read_body(response, deadline, rules.max_bytes, sock)
    except (OSError, http.client.HTTPException) as exc:
        kind = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
        raise HostError(f"host.fetch: {hostname} failed: {kind}") from None
    finally:
        conn.close()
    return answer_of(response.status, response.getheaders(), raw)


def answer_of(status: int, header_pairs: Iterable[tuple[str, str]], raw: bytes) -> dict:
    """{status, headers, body}: headers lowercased, repeated ones joined with ", "; the body decoded
    by the Content-Type's charset."""
    merged: dict[str, str] = {}
    for name, value in header_pairs:
        key = name.lower()
        merged[key] = f"{merged[key]}, {value}" if key in merged else value
    return {"status": status, "headers": merged, "body": _decode(raw, merged.get("content-type", ""))}

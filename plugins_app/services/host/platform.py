"""The platform bridge: the hub's signed outbound calls to an account's platform."""

from __future__ import annotations

import functools
import hashlib
import hmac
import http.client
import json
import logging
import time
from urllib.parse import urlsplit

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from plugins_app.errors import InvalidInput, PlatformError
from plugins_app.models import PlatformConfig
from plugins_app.services.host import ssrf

logger = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Hub-Timestamp"
SIGNATURE_HEADER = "X-Hub-Signature"
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
MAX_SECRET_CHARS = 200
# Statuses worth another attempt: the platform may be restarting or shedding load.
RETRYABLE_STATUSES = {408, 425, 429, 500, 502, 503, 504}
# All a plugin or an API caller learns of a failed call: the detail (status, refused or closed
# port) would make the bridge a port scanner, so it goes to the server log only.
UNREACHABLE = "the platform could not be reached"
NOT_ALLOWED = "this host is not one the operator allows for the platform (HUB_PLATFORM_ALLOWED_HOSTS)"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Hub-Signature value: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify_signature(secret: str, timestamp: str, body: bytes | str, header: str | None, *,
                     tolerance: int | None = 300, now: float | None = None) -> bool:
    """What the platform does with a request from the hub: check the signature (and its age)."""
    if not header or not timestamp or not secret:
        return False
    if isinstance(body, str):
        body = body.encode()
    if tolerance is not None:
        try:
            age = abs((time.time() if now is None else now) - int(timestamp))
        except ValueError:
            return False
        if age > tolerance:
            return False
    return hmac.compare_digest(sign(secret, timestamp, body), header)


def get_config(account) -> PlatformConfig | None:
    return PlatformConfig.objects.filter(account=account).first()


@transaction.atomic
def configure(account, data) -> PlatformConfig:
    """Set the base URL and/or the secret; an omitted secret keeps the stored one."""
    if not isinstance(data, dict):
        raise InvalidInput("baseUrl", 'send {"baseUrl": "https://...", "signingSecret": "..."}')
    config = PlatformConfig.objects.select_for_update().filter(account=account).first()
    base_url = check_base_url(data.get("baseUrl", config.base_url if config else None))
    secret = check_secret(data.get("signingSecret", config.signing_secret if config else ""))
    if config is None:
        config = PlatformConfig(account=account)
    config.base_url, config.signing_secret = base_url, secret
    config.save()
    return config


def check_base_url(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("baseUrl", "the platform's base URL is required")
    value = value.strip()
    try:
        parts = urlsplit(value)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and len(value) <= 500
        _ = parts.port   # raises on a port that is not a number
    except ValueError:
        valid = False
    if not valid:
        raise InvalidInput("baseUrl", "expected an http:// or https:// URL of at most 500 characters")
    if parts.query or parts.fragment:
        raise InvalidInput("baseUrl", "a base URL takes no query or fragment")
    if parts.username or parts.password:
        raise InvalidInput("baseUrl", "a base URL takes no credentials")
    try:
        if not allowed_hosts().allows_name(parts.hostname):
            checked_addresses(parts.hostname, _port(parts))
    except ssrf.Refused as exc:
        logger.warning("platform base URL refused: %s", exc)
        raise InvalidInput("baseUrl", NOT_ALLOWED) from None
    return value


def check_secret(value) -> str:
    if not isinstance(value, str) or len(value) > MAX_SECRET_CHARS:
        raise InvalidInput("signingSecret", f"expected a string of at most {MAX_SECRET_CHARS} characters")
    if not value:
        raise InvalidInput("signingSecret", "a signing secret is required: the hub sends nothing unsigned")
    return value


def allowed_hosts() -> ssrf.AllowList:
    """The operator's HUB_PLATFORM_ALLOWED_HOSTS (a list, or one comma-separated string)."""
    value = settings.HUB_HOST.platform_allowed_hosts
    entries = value.split(",") if isinstance(value, str) else value
    try:
        return _allow_list(tuple(entries))
    except ValueError as exc:
        raise ImproperlyConfigured(f"HUB_PLATFORM_ALLOWED_HOSTS: {exc}") from None


def check_allowed_hosts_setting(app_configs=None, **kwargs) -> list:
    """A system check (registered in the app's ready()): a malformed HUB_PLATFORM_ALLOWED_HOSTS stops
    the server at start, not at the first PUT."""
    try:
        allowed_hosts()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="plugins_app.E001")]
    return []


@functools.lru_cache(maxsize=8)
def _allow_list(entries: tuple[str, ...]) -> ssrf.AllowList:
    return ssrf.AllowList(entries)


def checked_addresses(host: str, port: int) -> list[ssrf.IPAddress]:
    """Resolve the platform's host once; every address must be allowed. Raises ssrf.Refused."""
    return ssrf.allowed_addresses(host, port, allowed_hosts())


def _port(parts) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def call(account, path: str, payload, *, timeout: float = 10) -> dict:
    """POST `payload` as signed JSON to the platform's base URL + `path`; return its JSON answer."""
    config = get_config(account)
    if config is None:
        raise PlatformError("the platform bridge is not configured for this account "
                            "(PUT /api/v1/platform)", retryable=False)
    if not config.signing_secret:
        raise PlatformError("the platform bridge has no signing secret, and the hub sends nothing unsigned "
                            "(PUT /api/v1/platform with a signingSecret)", retryable=False)
    url = config.base_url.rstrip("/") + path
    body = json.dumps(payload, separators=(",", ":")).encode()
    timestamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", "Accept": "application/json",
               "User-Agent": "middleware-hub", TIMESTAMP_HEADER: timestamp,
               SIGNATURE_HEADER: sign(config.signing_secret, timestamp, body)}
    status, raw = _post(url, body, headers, timeout)
    if not 200 <= status < 300:
        raise _unreachable(url, f"HTTP {status}", retryable=status in RETRYABLE_STATUSES)
    if not raw.strip():
        return {}
    try:
        answer = json.loads(raw)
    except ValueError:
        raise _unreachable(url, "an answer that is not JSON", retryable=False) from None
    if not isinstance(answer, dict):
        raise _unreachable(url, "an answer that is not a JSON object", retryable=False)
    return answer


def _unreachable(url: str, detail: str, *, retryable: bool = True) -> PlatformError:
    logger.warning("platform call to %s failed: %s", url, detail)
    return PlatformError(UNREACHABLE, retryable=retryable)


def deliver(account, path: str, payload, *, attempts: int = 4, backoff: float = 0.5,
            timeout: float = 10) -> dict:
    """`call`, retried with exponential backoff while the failure may be temporary."""
    for attempt in range(attempts):
        try:
            return call(account, path, payload, timeout=timeout)
        except PlatformError as exc:
            if not exc.retryable or attempt == attempts - 1:
                raise
            logger.info("platform delivery to %s failed (%s); retry %d", path, exc, attempt + 1)
            time.sleep(backoff * 2 ** attempt)
    raise AssertionError("unreachable")


def _post(url: str, body: bytes, headers: dict, timeout: float) -> tuple[int, bytes]:
    """POST to the platform, connecting only to an address the allow list accepts right now
    (checked again on every call, so a stored URL whose name was rebound goes nowhere)."""
    parts = urlsplit(url)
    host = parts.hostname
    assert host is not None   # check_base_url stores only a URL with a host
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        addresses = checked_addresses(host, _port(parts))
    except ssrf.Refused as exc:
        # A name that does not resolve may only be a DNS hiccup; a refused address stays refused.
        raise _unreachable(url, f"refused: {exc}", retryable=isinstance(exc, ssrf.Unresolved)) from None
    deadline = time.monotonic() + timeout
    try:
        conn = ssrf.connect_pinned(parts.scheme, host, _port(parts), addresses, deadline)
    except OSError as exc:
        raise _unreachable(url, f"{type(exc).__name__}: {exc}") from None
    try:
        conn.request("POST", target, body=body, headers=headers)
        response = conn.getresponse()
        raw = response.read(MAX_RESPONSE_BYTES + 1)
    except (OSError, http.client.HTTPException) as exc:
        raise _unreachable(url, f"{type(exc).__name__}: {exc}") from None
    finally:
        conn.close()
    if len(raw) > MAX_RESPONSE_BYTES:
        raise _unreachable(url, "an answer over 8 MiB", retryable=False)
    return response.status, raw

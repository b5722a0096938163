"""The platform bridge: the hub's signed outbound calls to an account's platform."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import time
from urllib.parse import urlsplit

from django.db import transaction

from plugins_app.errors import InvalidInput, PlatformError
from plugins_app.models import PlatformConfig

logger = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Hub-Timestamp"
SIGNATURE_HEADER = "X-Hub-Signature"
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
MAX_SECRET_CHARS = 200
# Statuses worth another attempt: the platform may be restarting or shedding load.
RETRYABLE_STATUSES = {408, 425, 429, 500, 502, 503, 504}


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
        parts.port   # raises on a port that is not a number
    except ValueError:
        valid = False
    if not valid:
        raise InvalidInput("baseUrl", "expected an http:// or https:// URL of at most 500 characters")
    if parts.query or parts.fragment:
        raise InvalidInput("baseUrl", "a base URL takes no query or fragment")
    return value


def check_secret(value) -> str:
    if not isinstance(value, str) or len(value) > MAX_SECRET_CHARS:
        raise InvalidInput("signingSecret", f"expected a string of at most {MAX_SECRET_CHARS} characters")
    return value


def call(account, path: str, payload, *, timeout: float = 10) -> dict:
    """POST `payload` as signed JSON to the platform's base URL + `path`; return its JSON answer."""
    config = get_config(account)
    if config is None:
        raise PlatformError("the platform bridge is not configured for this account "
                            "(PUT /api/v1/platform)", retryable=False)
    url = config.base_url.rstrip("/") + path
    body = json.dumps(payload, separators=(",", ":")).encode()
    timestamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", "Accept": "application/json",
               "User-Agent": "middleware-hub", TIMESTAMP_HEADER: timestamp}
    if config.signing_secret:
        headers[SIGNATURE_HEADER] = sign(config.signing_secret, timestamp, body)
    status, raw = _post(url, body, headers, timeout)
    if not 200 <= status < 300:
        raise PlatformError(f"the platform answered {path} with HTTP {status}",
                            retryable=status in RETRYABLE_STATUSES)
    if not raw.strip():
        return {}
    try:
        answer = json.loads(raw)
    except ValueError:
        raise PlatformError(f"the platform's answer to {path} is not JSON", retryable=False) from None
    if not isinstance(answer, dict):
        raise PlatformError(f"the platform's answer to {path} is not a JSON object", retryable=False)
    return answer


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
    parts = urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    conn = cls(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("POST", target, body=body, headers=headers)
        response = conn.getresponse()
        raw = response.read(MAX_RESPONSE_BYTES + 1)
    except (OSError, http.client.HTTPException) as exc:
        raise PlatformError(f"the platform at {parts.scheme}://{parts.netloc} is unreachable: "
                            f"{exc.__class__.__name__}: {exc}") from None
    finally:
        conn.close()
    if len(raw) > MAX_RESPONSE_BYTES:
        raise PlatformError("the platform's answer is over 8 MiB", retryable=False)
    return response.status, raw

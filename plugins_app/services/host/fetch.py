"""host.fetch: a real HTTP request to a public address, size- and time-capped, redirects not followed."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from django.conf import settings

from plugins_app.runtime.tables.permissions import secret_names
from plugins_app.runtime.web.chain import HostError
from plugins_app.services.execution.host_bridge import HostCall, member
from plugins_app.services.host import outbound, ssrf
from plugins_app.services.secrets.egress import substitute
from plugins_app.services.secrets.hosts import Target

PRIVATE_HINT = ("; on a development server, start it with HUB_FETCH_ALLOW_PRIVATE=1 (HUB_FETCH_ALLOW_PRIVATE=1 make run) "
                "to let plugins reach loopback and private addresses")


def explained(exc: ssrf.Refused) -> ssrf.Refused:
    """A refused address, with how a developer allows it when this is a development server."""
    if isinstance(exc, ssrf.Unresolved) or not settings.HUB_HOST.fetch_explain_private:
        return exc
    return ssrf.Refused(f"{exc}{PRIVATE_HINT}")


def hub_rules() -> outbound.Rules:
    """The hub's own: public addresses only (unless HUB_FETCH_ALLOW_PRIVATE), its time and size caps."""
    allow_private = settings.HUB_HOST.fetch_allow_private

    def check(host: str, port: int):
        try:
            return ssrf.checked_addresses(host, port, allow_private=allow_private)
        except ssrf.Refused as exc:
            raise explained(exc) from None

    return outbound.Rules(check, min(settings.HUB_HOST.fetch_timeout_seconds, 5.0), settings.HUB_HOST.fetch_max_bytes)


parse_url = outbound.parse_url   # the URL's rules are the same for every way host.fetch is made


def refused(exc: ssrf.Refused) -> HostError:
    return HostError(f"host.fetch refused: {explained(exc)}")


def payload_of(body: str | bytes | None) -> bytes | None:
    return outbound._check_body_size(body.encode() if isinstance(body, str) else body) if body is not None else None


def text_body(body: str | bytes | None) -> str | None:
    """The body as an injector sees it."""
    return body.decode() if isinstance(body, bytes) else body


def time_limit() -> float:
    """The seconds one fetch may take in all: connecting, sending, and reading the whole answer."""
    return min(settings.HUB_HOST.fetch_timeout_seconds, 5.0)


def host_header(scheme: str, host: str, port: int) -> str:
    """The Host header http.client sends for this host and port (the async fetch sends the same)."""
    shown = f"[{host}]" if ":" in host else host
    return shown if port == (443 if scheme == "https" else 80) else f"{shown}:{port}"


answer_of = outbound.answer_of   # the async fetch builds its answer the same way


def fetch_url(url: str, method: str = "GET", headers: dict | None = None, body: str | bytes | None = None,
              inject: outbound.Injector | None = None) -> dict:
    """Perform one request under the SSRF guard; returns {status, headers, body}."""
    return outbound.send(url, method, headers, body, hub_rules(), inject)


def with_secrets(values: dict[str, str], target: str, headers: dict, body: str | None) -> tuple[str, dict, str | None]:
    """The request with each granted {{secret.NAME}} of `values` put in."""
    headers = {name: substitute(value, values) for name, value in headers.items()}
    for name, value in headers.items():
        if any(c in value for c in "\r\n\0"):
            raise HostError(f"host.fetch: header {name!r} would hold a line break or NUL from a secret; "
                            "nothing was sent")
    # In the URL a value is percent-encoded, so it can't end the path or add a query parameter.
    return (substitute(target, values, lambda v: quote(v, safe="")), headers,
            None if body is None else substitute(body, values))


def _secret_injector(call: HostCall, names: list[str]) -> outbound.Injector:
    def inject(where: Target, target: str, headers: dict, body: str | None) -> tuple[str, dict, str | None]:
        return with_secrets(call.secrets.for_request("host.fetch", call.handler, names, where), target, headers, body)
    return inject


# What a replay or shadow run answers instead of fetching: an empty answer, marked.
STAND_IN = {"dryRun": True, "status": 0, "headers": {}, "body": ""}
# Headers that make a GET act as another method on many servers: such a GET is no plain read.
METHOD_OVERRIDES = {"x-http-method-override", "x-http-method", "x-method-override"}


def _plain_read(args: list) -> bool:
    """A GET or HEAD with no body and no method override: what a replay's "live reads" may make."""
    _, method, headers, body = outbound.request_parts(args)
    return (method in ("GET", "HEAD") and body is None
            and not any(name.lower() in METHOD_OVERRIDES for name in headers))


def planned(args: list) -> tuple[str, str, dict, str | None, list[str]]:
    """url, method, headers, body and the names of the secrets the request puts in."""
    url, method, headers, body = outbound.request_parts(args)
    names = secret_names("\n".join([url, *headers.values(), body or ""]))
    if names and secret_names(urlsplit(url).netloc):
        raise HostError("host.fetch: a secret can't go in the URL's host; put it in the path, the query, "
                        "a header or the body")
    return url, method, headers, body, names


@member("fetch", writes=lambda args: outbound.request_parts(args)[1] not in ("GET", "HEAD"), stand_in=STAND_IN,
        live_read=_plain_read)
def fetch(call: HostCall, args: list) -> dict:
    url, method, headers, body, names = planned(args)
    # Knows every secret granted to this handler (none: it changes nothing, at no cost).
    redactor = call.secrets.redactor_for([call.handler])
    try:
        answer = fetch_url(url, method, headers, body, inject=_secret_injector(call, names) if names else None)
    except HostError as exc:   # an error message may quote what was sent
        raise HostError(redactor.text(str(exc))) from None
    # The one redaction step where the answer enters the plugin: a server echoing the token back
    # hands the plugin `[secret NAME]`, so the value never reaches the isolate.
    return redactor.data(answer)

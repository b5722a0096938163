"""The one place API errors become responses: {"error": {"code", "message", "field", ...}}."""

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from plugins_app.errors import HubError, PayloadTooLarge, Unavailable
from plugins_app.runtime.web.tier import EngineSilent, EngineUnavailable
from plugins_app.services.log_once import OncePerInterval

logger = logging.getLogger(__name__)
ENGINE_RETRY_SECONDS = 1     # a dead supervisor is started again within about a second
DATABASE_RETRY_SECONDS = 5   # a database restart or failover takes seconds
OUTAGE_LOG_SECONDS = 10      # an outage is logged once per this many seconds, not once per call
_outages = OncePerInterval(logger, OUTAGE_LOG_SECONDS)


def _message(detail) -> str:
    if isinstance(detail, dict) and set(detail) == {"detail"}:
        return _message(detail["detail"])   # an APIException's own message, not a field's
    if isinstance(detail, dict):
        field, value = next(iter(detail.items()))
        return f"{field}: {_message(value)}"
    if isinstance(detail, list):
        return _message(detail[0]) if detail else "invalid"
    return str(detail)


def _field(detail, prefix: str = "") -> str | None:
    """The path of the first field a validation error names ("schedule.crontab", "order[0]"), or None."""
    if isinstance(detail, dict) and detail:
        key, value = next(iter(detail.items()))
        if key in ("non_field_errors", "detail"):
            return prefix or None
        path = f"{prefix}[{key}]" if isinstance(key, int) else (f"{prefix}.{key}" if prefix else str(key))
        return _field(value, path)
    if isinstance(detail, list):
        for index, item in enumerate(detail):
            if isinstance(item, (dict, list)) and item:
                return _field(item, f"{prefix}[{index}]")
    return prefix or None


def _outage(exc) -> Unavailable | None:
    """A part that is away, as the typed error the caller can act on (503, Retry-After), instead of
    Django's HTML 500 and a traceback per call."""
    if isinstance(exc, EngineSilent):
        # A part's fault: no handler is blamed, and a chain whose veto is unknown is not let through.
        found = Unavailable("the hook engine stopped answering" + (
            "; whether the chain ran is unknown: send the call again" if exc.started else "; nothing ran"),
            retry_after=ENGINE_RETRY_SECONDS)
    elif isinstance(exc, EngineUnavailable):
        found = Unavailable("no hook engine is answering on this machine (it is being restarted); nothing ran",
                            retry_after=ENGINE_RETRY_SECONDS)
    elif isinstance(exc, (OperationalError, InterfaceError)):
        found = Unavailable("the database is not answering; send the call again shortly",
                            retry_after=DATABASE_RETRY_SECONDS)
    else:
        return None
    _outages.log(type(exc).__name__, logging.WARNING, "answering 503: %s (%s: %s)", found.detail,
                 type(exc).__name__, exc)
    return found


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    exc = _outage(exc) or exc
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(f"the request body is over the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE // (1024 * 1024)} MiB limit")
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "not found")
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    body = {"code": getattr(exc, "default_code", "error"), "message": _message(response.data), "field": None}
    if isinstance(exc, HubError):
        body["code"] = exc.default_code
        body.update(exc.extra)
    elif isinstance(exc, exceptions.ValidationError) and isinstance(response.data, dict):
        body["code"] = "invalid"
        body["field"] = _field(response.data)
        body["fields"] = response.data
    if response.status_code == status.HTTP_401_UNAUTHORIZED:
        body["code"] = "unauthenticated"
    headers = _auth_headers(response)
    if isinstance(exc, Unavailable):
        headers["Retry-After"] = str(exc.retry_after)
    return Response({"error": body}, status=response.status_code, headers=headers)


def error_body(exc: HubError) -> dict[str, Any]:
    """A typed error's JSON body, as exception_handler shapes it."""
    return {"error": {"code": exc.default_code, "message": _message(exc.detail), "field": None, **exc.extra}}


def answer_before_view(exc: HubError) -> JsonResponse:
    """A typed error met before any view ran (a middleware's: admission shedding a call), in the shape
    and with the headers exception_handler gives it."""
    response = JsonResponse(error_body(exc), status=exc.status_code)
    if isinstance(exc, Unavailable):
        response["Retry-After"] = str(exc.retry_after)
    return response


def _auth_headers(response: Response) -> dict[str, str]:
    return {k: v for k, v in response.items() if k.lower() == "www-authenticate"}

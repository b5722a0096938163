"""Middleware that runs each execute and try call in its account's turn (see services.engine.admission)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from accounts.authentication import ApiPrincipal
from accounts.models import parse_key
from plugins_app.api.errors import answer_before_view, error_body
from plugins_app.errors import Overloaded
from plugins_app.services.engine import admission, async_admission
from plugins_app.services.engine.admission_policy import Shed
from plugins_app.services.log_once import OncePerInterval

# Where middleware_hub/asgi.py's handler notes when a request reached the process (a scope key).
ARRIVED = "hub.arrived"
# The calls that run an account's chain on the API's demand: an execute, and a try-run (which costs
# the machine what an execute does, so one account's try-runs take that account's turns too).
ADMITTED_PATH = re.compile(r"^/api/v1/hooks/[^/]+/(?:execute|try)$")
logger = logging.getLogger(__name__)
_shedding = OncePerInterval(logger)   # under overload every call could log: once per interval, with a count


class FairAdmissionMiddleware:
    """First in MIDDLEWARE, so the whole call — authentication included — waits for its turn:
    a tenant's retries can only slow that tenant, not the process."""

    sync_capable = async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]):
        self.get_response = get_response
        # Under ASGI the handler is a coroutine: the turn is then the event loop's gate's
        # (services/engine/async_admission.py), and no thread waits for it.
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self.__acall__(request)
        if request.method != "POST" or not ADMITTED_PATH.match(request.path_info):
            return self.get_response(request)
        prefix = _key_prefix(request)
        try:
            with admission.get_gate().turn(admission.line_for(prefix)):
                response = self.get_response(request)
        except Shed as shed:
            return _refused(shed)
        _learn(request, prefix)
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if request.method != "POST" or not ADMITTED_PATH.match(request.path_info):
            return await self.get_response(request)
        prefix = _key_prefix(request)
        scope = getattr(request, "scope", None) or {}
        try:
            async with async_admission.get_gate().turn(admission.line_for(prefix), arrived=scope.get(ARRIVED)):
                response = await self.get_response(request)
        except Shed as shed:
            return _refused(shed)
        _learn(request, prefix)
        return response


async def admit_asgi(scope: dict, send: Callable[[dict], Awaitable[None]], serve: Callable[[], Awaitable[object]]) -> None:
    """The ASGI handler's admission (middleware_hub/asgi.py) for an execute or try call, before Django
    builds a request: under overload a shed call then costs the process next to nothing (no request
    object, no signals, no middleware hooks on asgiref's one sync thread), which is what lets a hub
    behind its load shed thousands of calls a second and catch up. `serve()` runs the call in its
    turn; the middleware's own turn, inside it, is the same turn (a nested one)."""
    prefix = _scope_key_prefix(scope)
    try:
        async with async_admission.get_gate().turn(admission.line_for(prefix), arrived=scope.get(ARRIVED)):
            await serve()
    except Shed as shed:
        body = json.dumps(error_body(_overloaded(shed))).encode()
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"retry-after", str(settings.HUB_ADMISSION.retry_after).encode())]})
        await send({"type": "http.response.body", "body": body})


def is_admitted(method: str | None, path_info: str) -> bool:
    """Whether a request is one that takes its account's turn (an execute or try call)."""
    return method == "POST" and ADMITTED_PATH.match(path_info) is not None


def _overloaded(shed: Shed) -> Overloaded:
    _shedding.log("shed", logging.WARNING, "answering 503 overloaded: a call could not start within %d ms (%s)",
                  settings.HUB_ADMISSION.queue_deadline_ms, shed.reason)
    return Overloaded(f"the hub is overloaded: this call could not start within "
                      f"{settings.HUB_ADMISSION.queue_deadline_ms} ms ({shed.reason}); "
                      "nothing ran, send it again after Retry-After", retry_after=settings.HUB_ADMISSION.retry_after)


def _refused(shed: Shed) -> HttpResponseBase:
    """A call shed for the queue deadline: a JSON 503 with Retry-After, before its key was even read."""
    return answer_before_view(_overloaded(shed))


def _scope_key_prefix(scope: dict) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, raw = value.decode("latin-1").partition(" ")
            return parse_key(raw.strip()) if scheme.lower() == "bearer" else None
    return None


def _learn(request, prefix: str | None) -> None:
    principal = vars(request).get("user")   # DRF sets it once the key is checked
    if prefix is not None and isinstance(principal, ApiPrincipal):
        admission.learn(prefix, principal.account.pk)


def _key_prefix(request: HttpRequest) -> str | None:
    scheme, _, raw = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return parse_key(raw.strip()) if scheme.lower() == "bearer" else None

"""Middleware that runs each execute call in its account's turn (see services.engine.admission)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from accounts.authentication import ApiPrincipal
from accounts.models import parse_key
from plugins_app.services.engine import admission, async_admission

EXECUTE_PATH = re.compile(r"^/api/v1/hooks/[^/]+/execute$")


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
        if request.method != "POST" or not EXECUTE_PATH.match(request.path_info):
            return self.get_response(request)
        prefix = _key_prefix(request)
        with admission.get_gate().turn(admission.line_for(prefix)):
            response = self.get_response(request)
        _learn(request, prefix)
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if request.method != "POST" or not EXECUTE_PATH.match(request.path_info):
            return await self.get_response(request)
        prefix = _key_prefix(request)
        async with async_admission.get_gate().turn(admission.line_for(prefix)):
            response = await self.get_response(request)
        _learn(request, prefix)
        return response


def _learn(request, prefix: str | None) -> None:
    principal = vars(request).get("user")   # DRF sets it once the key is checked
    if prefix is not None and isinstance(principal, ApiPrincipal):
        admission.learn(prefix, principal.account.pk)


def _key_prefix(request: HttpRequest) -> str | None:
    scheme, _, raw = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return parse_key(raw.strip()) if scheme.lower() == "bearer" else None

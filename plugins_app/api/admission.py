"""Middleware that runs each execute call in its account's turn (see services.engine.admission)."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import HttpRequest
from django.http.response import HttpResponseBase

from accounts.authentication import ApiPrincipal
from accounts.models import parse_key
from plugins_app.services.engine import admission

EXECUTE_PATH = re.compile(r"^/api/v1/hooks/[^/]+/execute$")


class FairAdmissionMiddleware:
    """First in MIDDLEWARE, so the whole call — authentication included — waits for its turn:
    a tenant's retries can only slow that tenant, not the process."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.method != "POST" or not EXECUTE_PATH.match(request.path_info):
            return self.get_response(request)
        prefix = _key_prefix(request)
        with admission.get_gate().turn(admission.line_for(prefix)):
            response = self.get_response(request)
        principal = vars(request).get("user")   # DRF sets it once the key is checked
        if prefix is not None and isinstance(principal, ApiPrincipal):
            admission.learn(prefix, principal.account.pk)
        return response


def _key_prefix(request: HttpRequest) -> str | None:
    scheme, _, raw = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return parse_key(raw.strip()) if scheme.lower() == "bearer" else None

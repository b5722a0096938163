"""The execute API's own ASGI handler: Django's, with a middleware chain that never leaves the event loop.

Under ASGI, Django runs each sync middleware hook (a MiddlewareMixin's process_request and
process_response) through sync_to_async with thread_sensitive=True. The execute path runs outside a
ThreadSensitiveContext (middleware_hub/asgi.py says why), so every one of those hops lands on asgiref's
one shared sync thread: about fifteen per call with the project's MIDDLEWARE, each a GIL hand-off both
ways. Under load that thread is a queue every call stands in, the quiet tenant's as much as the busy
one's (issue 38 measured quiet tenants' p99 at 16-161x their run alone).

An execute call needs little of that chain: it is authenticated by its API key (DRF), is exempt from
CSRF, has no session, user, messages or trailing-slash redirect. What it does need runs here natively
async, or inline where the hook is pure computation on headers (no I/O, nothing that could block the
loop). EXECUTE_CHAIN says, for every entry of settings.MIDDLEWARE, which it is; a test keeps the two in
step, so a middleware added to the project is a decision made here too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import ResolverMatch
from django.utils.module_loading import import_string

from plugins_app.api.execution.async_views import AsyncHookExecuteView

# How each project middleware takes part in an execute call: "async" (natively async, awaited as
# is), "inline" (its process_request/process_response called on the loop: pure header work), or
# "skip" (nothing an API-key call uses).
EXECUTE_CHAIN: dict[str, str] = {
    "plugins_app.api.admission.FairAdmissionMiddleware": "async",
    "django.middleware.security.SecurityMiddleware": "inline",
    "django.contrib.sessions.middleware.SessionMiddleware": "skip",   # no session: the key authenticates
    "django.middleware.common.CommonMiddleware": "skip",              # slash redirects: a POST to a fixed path
    "django.middleware.csrf.CsrfViewMiddleware": "skip",              # DRF's views are csrf_exempt
    "django.contrib.auth.middleware.AuthenticationMiddleware": "skip",   # DRF authenticates the key
    "plugins_app.services.audit.changes.ChangeActorMiddleware": "async",
    "django.contrib.messages.middleware.MessageMiddleware": "skip",   # no messages in a JSON answer
    "django.middleware.clickjacking.XFrameOptionsMiddleware": "inline",
}

Respond = Callable[[HttpRequest], Awaitable[HttpResponseBase]]


class Inline:
    """A MiddlewareMixin's hooks called on the event loop, for hooks that only read and set headers."""

    sync_capable, async_capable = False, True

    def __init__(self, middleware_class: type, get_response: Respond):
        self.get_response = get_response
        self.hooks = middleware_class(get_response)
        markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        process_request = getattr(self.hooks, "process_request", None)
        response = process_request(request) if process_request else None
        if response is None:
            response = await self.get_response(request)
        process_response = getattr(self.hooks, "process_response", None)
        return process_response(request, response) if process_response else response


class ExecuteASGIHandler(ASGIHandler):
    """Serves POST /api/v1/hooks/{hook}/execute; every other request goes to Django's own handler."""

    # The URLconf names the synchronous view, which WSGI serves without a hop. Here the route resolves
    # as usual (its name, kwargs and errors), and its view is the async twin, awaited on the loop.
    async_view = staticmethod(AsyncHookExecuteView.as_view())

    def resolve_request(self, request: HttpRequest) -> ResolverMatch:
        match = super().resolve_request(request)
        if match.url_name == "hook-execute":
            match.func = self.async_view
        return match

    def load_middleware(self, is_async: bool = False) -> None:
        assert is_async, "the execute handler is async only"
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        handler: Any = convert_exception_to_response(self._get_response_async)  # type: ignore[attr-defined]  # not in the stubs
        for path in reversed(settings.MIDDLEWARE):
            how = EXECUTE_CHAIN.get(path)
            if how is None:
                raise LookupError(f"{path} is in MIDDLEWARE but not in EXECUTE_CHAIN "
                                  "(plugins_app/api/execution/asgi_handler.py): say how an execute call uses it")
            if how == "skip":
                continue
            middleware = import_string(path)
            instance = Inline(middleware, handler) if how == "inline" else middleware(handler)
            if not iscoroutinefunction(instance):
                raise TypeError(f"{path} is listed as async but did not build an async middleware")
            handler = convert_exception_to_response(instance)
        self._middleware_chain = handler

"""`POST /api/v1/hooks/{hook}/execute` as an async view: no thread is held while the chain runs.

HookExecuteView's DRF machinery (the key's authentication, the edge's checks, the parsers, the
renderers, api/errors.py's answers) runs unchanged, in two short steps on a small pool of threads:
before the engine (the request read, checked and the run prepared: the seam's `prepare`) and after it
(`finish`, the answer rendered). Between them the call awaits its engine, and the host calls the
engine asks for, on the event loop (services/execution/invoke.py's `run_async`): a waiting call is a
coroutine of a few KiB, not a thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections
from django.http import HttpResponse, HttpResponseBase
from rest_framework.response import Response

from middleware_hub.query_deadline import deadline_for
from plugins_app.api.execution import serializers as s
from plugins_app.api.execution.views import HookExecuteView
from plugins_app.services.execution import execute as execution
from plugins_app.services.execution.async_host_bridge import on_request_thread
from plugins_app.services.execution.invoke import Invocation, finish, run_async
from plugins_app.services.observability import tracing

T = TypeVar("T")
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _steps() -> ThreadPoolExecutor:
    """The threads the sync steps run on (HUB_WORKER_THREADS of them): a step holds one for
    milliseconds, so a few serve every call in flight; a burst waits for one rather than adding threads."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(settings.HUB_WORKER_THREADS, thread_name_prefix="hub-step")
        return _executor


async def in_step_thread(fn: Callable[..., T], *args: Any, served_by_asgi: bool = True) -> T:
    """`fn(*args)` on a step thread, with this task's context (the admission turn, the change actor).
    Each step drops a database connection that broke or outlived its age first, as Django does at a
    request's start and end: the pool's threads keep theirs between calls.

    Served by WSGI (the development server, Django's test client), the view runs inside async_to_sync,
    and a step runs on the request's own thread instead, as every sync view does there (and sees the
    same database connection: a test's transaction, say). Under ASGI, Django would give each request
    a thread of its own for that (ThreadSensitiveContext), idle but held while the call waits."""
    if not served_by_asgi:
        return await sync_to_async(fn, thread_sensitive=True)(*args)

    def step() -> T:
        close_old_connections()
        return fn(*args)
    return await sync_to_async(step, thread_sensitive=False, executor=_steps())()


class AsyncHookExecuteView(HookExecuteView):
    """HookExecuteView's URL, request, answer and errors, with the engine awaited."""

    view_is_async = True   # Django's as_view() then treats the view as a coroutine function

    async def dispatch(self, request, *args, **kwargs) -> HttpResponseBase:  # type: ignore[override]  # async, unlike APIView's
        asgi = isinstance(request, ASGIRequest)
        # Served by WSGI, the database's host members and lane moves too stay on the request's thread.
        # Reset at the end: async_to_sync hands a coroutine's context changes back to its caller.
        token = on_request_thread.set(not asgi)
        try:
            with deadline_for(settings.HUB_DATABASE.execute_deadline_seconds):   # as HookExecuteView.dispatch
                response = await self._answer(request, args, kwargs, asgi)
        finally:
            on_request_thread.reset(token)
        # Rendered already, on the step's thread. Handed to Django's handler as a DRF Response, it would
        # be rendered again (a no-op) on asgiref's one shared thread: a hop every call in flight queues for.
        return plain(response) if asgi else response

    async def _answer(self, request, args: tuple, kwargs: dict, asgi: bool) -> HttpResponseBase:
        begun = await in_step_thread(self._begin, request, args, kwargs, served_by_asgi=asgi)
        if not isinstance(begun, Invocation):
            return begun
        try:
            await run_async(begun)
        except Exception as exc:   # no engine took it (503), or a bug: answered as DRF would
            return await in_step_thread(self._answer_error, exc, served_by_asgi=asgi)
        return await in_step_thread(self._end, begun, served_by_asgi=asgi)

    def _begin(self, request, args: tuple, kwargs: dict) -> Invocation | HttpResponseBase:
        """DRF's dispatch up to the handler (authentication, permissions, the edge's checks), then the
        seam's prepare; an error is answered here."""
        self.args, self.kwargs = args, kwargs
        drf_request = self.initialize_request(request, *args, **kwargs)
        self.request = drf_request
        self.headers = self.default_response_headers
        try:
            self.initial(drf_request, *args, **kwargs)
            method = (drf_request.method or "").lower()
            if method != "post":   # OPTIONS, or a method not allowed: DRF's own answers
                known = method in self.http_method_names
                handler = getattr(self, method, self.http_method_not_allowed) if known else self.http_method_not_allowed
                return self._rendered(handler(drf_request, *args, **kwargs))
            return execution.prepare_request(self.account, kwargs["hook"], drf_request.data,
                                             traceparent=drf_request.META.get("HTTP_TRACEPARENT"),
                                             asynchronous=True)
        except Exception as exc:
            return self._answer_error(exc)

    def _end(self, invocation: Invocation) -> HttpResponseBase:
        try:
            run = finish(invocation)
            assert run.result is not None
            # The platform can tell the hub's chain time from the network's (and so can the bench).
            headers = {"Server-Timing": tracing.server_timing(run.chain_ms, run.result.trace), **run.headers()}
            return self._rendered(Response(s.execute_response(run.result, run.effects), headers=headers))
        except Exception as exc:
            return self._answer_error(exc)

    def _answer_error(self, exc: Exception) -> HttpResponseBase:
        return self._rendered(self.handle_exception(exc))

    def _rendered(self, response: Response) -> HttpResponseBase:
        self.response = self.finalize_response(self.request, response, *self.args, **self.kwargs)
        self.response.render()   # here, on the step's thread, not by the handler on the loop's
        return self.response


def plain(response: HttpResponseBase) -> HttpResponseBase:
    """A rendered DRF Response as a plain HttpResponse: the same status, headers and bytes."""
    if not isinstance(response, Response):
        return response
    answer = HttpResponse(response.content, status=response.status_code, headers=dict(response.items()))
    answer.cookies = response.cookies
    return answer

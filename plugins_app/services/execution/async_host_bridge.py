"""The host bridge for an async chain run (runtime/web/async_chain.py): the same grants, counting and
dry-run stand-ins as HostBridge, with the members that wait on the network (host.fetch, host.llm,
host.decide) answered by their async implementations on the event loop, and the others (the
database's and SSH's: session, workspace, agents, ssh) on a thread of a small pool of their own."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection

from plugins_app.runtime.web.chain import Handler
from plugins_app.services.engine.tier import get_tier
from plugins_app.services.execution.host_bridge import MEMBERS, HostBridge, HostCall, Member, StoodIn

AsyncMember = Callable[[HostCall, list], Awaitable[Any]]
# Filled by register_async_members() (from the app's ready()): member name -> its async implementation.
# A member without one runs its sync function on a host thread.
ASYNC_MEMBERS: dict[str, AsyncMember] = {}
_MARK = "async_host_member"
# Threads for the members without an async implementation (database, SSH): bounded, so a burst of
# such calls waits for a thread rather than starting one per call. Not the loop's default executor,
# which resolves host names for host.fetch.
HOST_THREADS = 16
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()

T = TypeVar("T")

# A host thread's connection used this recently is not health-checked again before its next call: on a
# busy hub that check was one more database round trip per host call (as long as a host.kv incr's own).
# One left idle longer is checked, as a request's is, so a connection the database dropped meanwhile is
# replaced before a plugin's call could fail on it.
FRESH_CONNECTION_SECONDS = 1.0
_last_call = threading.local()


def async_member(name: str) -> Callable[[AsyncMember], AsyncMember]:
    """Mark the coroutine function answering `host.<name>(...)` in an async run; the member's sync
    function (host_bridge.member) stays the reference: same rules, and what a sync run calls."""
    def mark(fn: AsyncMember) -> AsyncMember:
        setattr(fn, _MARK, name)
        return fn
    return mark


def marked_async_members(module: object) -> list[AsyncMember]:
    return [fn for fn in vars(module).values() if callable(fn) and hasattr(fn, _MARK)]


def register_async_members(functions: list[AsyncMember]) -> None:
    """Install the async implementations; each must be of a member that has its sync function."""
    found: dict[str, AsyncMember] = {}
    for fn in functions:
        name = getattr(fn, _MARK)
        if name not in MEMBERS:
            raise ValueError(f"host.{name} has an async implementation but no member function")
        if name in found and found[name] is not fn:
            raise ValueError(f"host.{name} has two async implementations")
        found[name] = fn
    ASYNC_MEMBERS.clear()
    ASYNC_MEMBERS.update(found)


def _host_threads() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(HOST_THREADS, thread_name_prefix="host-member")
        return _executor


# Set by a run whose sync work must stay on its request's thread: the async execute view served by WSGI
# (the development server, Django's test client, whose transaction is that thread's connection).
on_request_thread: contextvars.ContextVar[bool] = contextvars.ContextVar("hub_on_request_thread", default=False)


async def in_host_thread(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on a host thread, with this context's variables (a tracing span, for one). Its
    database connection is looked after as a request's is (too old or broken: closed, before and
    after), since no request begins or ends on that thread. With `on_request_thread` set, on the
    request's own thread instead (whose connection its request looks after)."""
    if on_request_thread.get():
        return await sync_to_async(fn, thread_sensitive=True)(*args)
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(
        _host_threads(), functools.partial(context.run, _with_connection, fn, *args))


def _with_connection(fn: Callable[..., T], *args: Any) -> T:
    close_old_connections()
    if connection.connection is not None and time.monotonic() - getattr(_last_call, "ended", -1e9) < FRESH_CONNECTION_SECONDS:
        # Django's flag (absent from django-stubs): its check would run before this call's first statement.
        connection.health_check_done = True  # type: ignore[attr-defined]
    try:
        return fn(*args)
    finally:
        close_old_connections()   # closes one that failed or is past its age
        _last_call.ended = time.monotonic()


def _nested_call(fn: Member, call: HostCall, args: list) -> Any:
    # A member that runs a chain of its own (host.session.peer.send) runs it on a private engine, as
    # inside a sync run: its caller's chain holds an engine meanwhile.
    with get_tier().nested():
        return fn(call, args)


class AsyncHostBridge(HostBridge):
    """HostBridge for run_chain_async: pass `bridge.answer` as its `host`. Built, and read after the
    run (effects, would_call, secrets), as HostBridge is.

    The async tier answers a chain's host calls as they come, so calls a handler makes without
    awaiting each (Promise.all) overlap: the network members' waits do. The members on threads take
    their turn, one at a time per run in the order called, as a sync run answers them all: two
    workspace writes of one chain never race each other."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._turn: asyncio.Lock | None = None

    async def answer(self, handler: Handler, name: str, args: list) -> Any:
        """The value of `host.<name>(*args)` for `handler`; raises HostError to reject its promise."""
        prepared = self.prepare(handler, name, args)
        if isinstance(prepared, StoodIn):
            if prepared.own is None:
                return prepared.answer()
            async with self._in_turn():   # a member's own dry run may use the database, as the member would
                return await in_host_thread(prepared.answer)
        fn, call = prepared
        member = ASYNC_MEMBERS.get(name)
        if member is not None:
            return await member(call, args)
        async with self._in_turn():
            return await in_host_thread(_nested_call, fn, call, args)

    def _in_turn(self) -> asyncio.Lock:
        if self._turn is None:
            self._turn = asyncio.Lock()
        return self._turn

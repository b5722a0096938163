"""Fair admission for the async execute path: FairGate's turns on an event loop, no thread per waiting call."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fcntl
import logging
import math
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass

from django.conf import settings

from plugins_app.services.engine.admission import _account_id, _machine_places
from plugins_app.services.engine.machine_places import _FLOCK, MachinePlaces, Place, _lock

log = logging.getLogger(__name__)

# A call waiting for its account's machine place tries the kernel's lock again after this long,
# doubling up to the ceiling: a sync call sleeps in the kernel (F_OFD_SETLKW), which would hold a
# thread; the lock was never first come, so polling loses no order it had.
POLL_FIRST_S = 0.001
POLL_MAX_S = 0.02


@dataclass
class _Call:
    """The turn of one call (its task's context): its line, whether it holds the process's place, and
    the machine place with the open file description holding it."""

    key: Hashable
    holding: bool = False
    place: Place | None = None
    fd: int | None = None


_current: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("hub_admission_turn", default=None)


class AsyncFairGate:
    """FairGate (services/engine/admission.py) for coroutines on one event loop: at most `capacity` calls
    run at once, at most `per_account` of them one account's, freed places going round the accounts in
    turn, and a call coming back from its engine before new calls. A waiting call is a future, not a
    parked thread. Every method runs on the loop's thread, so the books need no lock.

    The machine's places (MachinePlaces) keep their semantics: the same locks on the same file, so sync
    and async workers of one machine share them, with two changes. Each call takes its place through an
    open file description of its own, from a pool (a sync call uses its thread's; here one thread runs
    every call). And a call whose account's first place is taken retries the lock every few
    milliseconds instead of sleeping in the kernel; a place's rest is an asyncio sleep."""

    def __init__(self, capacity: float = math.inf, per_account: float | None = None,
                 on_wait: Callable[[float], None] | None = None, machine: MachinePlaces | None = None,
                 on_rest: Callable[[float], None] | None = None):
        self.capacity = capacity
        self.per_account = per_account or capacity
        self.on_wait, self.on_rest = on_wait, on_rest
        self.machine = machine
        self._machine_failed = False
        self._running = 0
        self._held: dict[Hashable, int] = {}
        self._returning: deque[tuple[Hashable, asyncio.Future[None]]] = deque()
        self._waiting: OrderedDict[Hashable, deque[asyncio.Future[None]]] = OrderedDict()
        self._descriptions: list[int] = []   # open file descriptions holding no lock, for the next calls

    @contextlib.asynccontextmanager
    async def turn(self, key: Hashable) -> AsyncIterator[None]:
        """Run the body in `key`'s turn (a nested turn of the same task shares it)."""
        if _current.get() is not None:
            yield
            return
        started = time.perf_counter()
        call = _Call(key)
        await self._enter(call, returning=False)
        if self.on_wait is not None:
            self.on_wait(time.perf_counter() - started)
        token = _current.set(call)
        try:
            yield
        finally:
            _current.reset(token)
            if call.holding:
                await self._leave(call)

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        """Around a wait that needs no CPU of this process (the engine, a host call): the places go to
        others meanwhile, and coming back the call goes before new ones."""
        call = _current.get()
        if call is None or not call.holding:
            yield
            return
        await self._leave(call)
        try:
            yield
        finally:
            await self._enter(call, returning=True)

    def queued(self) -> int:
        return len(self._returning) + sum(len(q) for q in self._waiting.values())

    async def _enter(self, call: _Call, *, returning: bool) -> None:
        await self._acquire(call.key, returning=returning)
        call.holding = True
        account_id = _account_id(call.key)
        if self.machine is not None and account_id is not None and not returning:
            try:
                await self._take_machine(call, account_id)
            except OSError:
                if not self._machine_failed:
                    self._machine_failed = True
                    log.exception("machine-wide admission failed; each web process counts alone meanwhile")

    async def _leave(self, call: _Call) -> None:
        call.holding = False
        self._release(call.key)
        place, fd, call.place, call.fd = call.place, call.fd, None, None
        if place is None or fd is None or self.machine is None:
            return
        rest = self.machine.rest_for(place)
        if rest:
            await asyncio.sleep(rest)
            if self.on_rest is not None:
                self.on_rest(rest)
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, place.slot, 1, 0))
        self._descriptions.append(fd)

    async def _take_machine(self, call: _Call, account_id: int) -> None:
        assert self.machine is not None
        fd = self._descriptions.pop() if self._descriptions else os.open(
            self.machine.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            first = self.machine._first_slot(account_id)
            if _lock(fd, first, wait=False):
                call.place, call.fd = Place(first, account_id, waited=False), fd
                return
            pause = POLL_FIRST_S
            while True:
                share = self.machine.capacity // (self.machine.accounts_running(besides=account_id) + 1)
                for slot in (first, *range(first + 1, first + share)):
                    if _lock(fd, slot, wait=False):
                        call.place, call.fd = Place(slot, account_id, waited=True), fd
                        return
                await asyncio.sleep(pause)
                pause = min(pause * 2, POLL_MAX_S)
        except BaseException:
            self._descriptions.append(fd)
            raise

    async def _acquire(self, key: Hashable, *, returning: bool) -> None:
        if self._free_now(key, returning):
            self._grant(key)
            return
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if returning:
            self._returning.append((key, ready))
        else:
            self._waiting.setdefault(key, deque()).append(ready)
        self._dispatch()
        try:
            await ready
        except asyncio.CancelledError:   # the client went away while it waited
            if ready.done() and not ready.cancelled():
                self._release(key)   # it had been given the place: pass it on
            else:
                self._forget(key, ready, returning)
            raise

    def _forget(self, key: Hashable, ready: asyncio.Future[None], returning: bool) -> None:
        if returning:
            with contextlib.suppress(ValueError):
                self._returning.remove((key, ready))
            return
        queue = self._waiting.get(key)
        if queue is not None:
            with contextlib.suppress(ValueError):
                queue.remove(ready)
            if not queue:
                del self._waiting[key]

    def _free_now(self, key: Hashable, returning: bool) -> bool:
        if self._running >= self.capacity or self._returning:
            return False
        return returning or (not self._waiting and self._held.get(key, 0) < self.per_account)

    def _release(self, key: Hashable) -> None:
        self._running -= 1
        left = self._held[key] - 1
        if left:
            self._held[key] = left
        else:
            del self._held[key]
        self._dispatch()

    def _dispatch(self) -> None:
        while self._running < self.capacity:
            picked = self._pick()
            if picked is None:
                break
            picked.set_result(None)

    def _pick(self) -> asyncio.Future[None] | None:
        if self._returning:
            key, ready = self._returning.popleft()
        else:
            key = next((k for k in self._waiting if self._held.get(k, 0) < self.per_account), None)
            if key is None:
                return None
            queue = self._waiting[key]
            ready = queue.popleft()
            if queue:
                self._waiting.move_to_end(key)
            else:
                del self._waiting[key]
        self._grant(key)
        return ready

    def _grant(self, key: Hashable) -> None:
        self._running += 1
        self._held[key] = self._held.get(key, 0) + 1


class AsyncOpenGate:
    """No admission control (both limits 0)."""

    @contextlib.asynccontextmanager
    async def turn(self, key: Hashable) -> AsyncIterator[None]:
        yield

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        yield

    def queued(self) -> int:
        return 0


# One gate per event loop: its futures belong to that loop (a server runs one; tests may run several).
_gates: dict[asyncio.AbstractEventLoop, AsyncFairGate | AsyncOpenGate] = {}
_gates_lock = threading.Lock()


def get_gate() -> AsyncFairGate | AsyncOpenGate:
    """This event loop's gate, with the limits and metrics hooks of admission.get_gate()."""
    from plugins_app.services.engine import admission

    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        with _gates_lock:
            for stale in [other for other in _gates if other.is_closed()]:
                del _gates[stale]
            capacity = settings.HUB_ADMISSION.concurrency or math.inf
            per_account = settings.HUB_ADMISSION.per_account or math.inf
            gate = _gates[loop] = (
                AsyncFairGate(capacity, per_account, on_wait=admission._on_wait,
                              machine=_machine_places(per_account), on_rest=admission._on_rest)
                if min(capacity, per_account) < math.inf else AsyncOpenGate())
    return gate


def waiting() -> contextlib.AbstractAsyncContextManager[None]:
    """The running call's `waiting()` (what the async tier enters around each wait on its engine)."""
    return get_gate().waiting()

"""Fair admission for the async execute path: FairGate's turns on an event loop, no thread per waiting call."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fcntl
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass

from django.conf import settings

from plugins_app.services.engine.admission import _account_id, _machine_places
from plugins_app.services.engine.admission_policy import FairBooks, Shed, Waiter
from plugins_app.services.engine.machine_places import (
    _FLOCK,
    POLL_FIRST_S,
    POLL_MAX_S,
    MachinePlaces,
    Place,
    _lock,
)
from plugins_app.services.per_loop import PerLoop

log = logging.getLogger(__name__)

# How often the loop's lag is sampled, and how fast a sample's excess fades (per sample): a stall
# counts at once and for about a tenth of a second after, so a shed call's answer leaves in time.
LAG_PERIOD_S = 0.025
LAG_FADE = 0.25


class LoopLag:
    """How far behind its timers an event loop runs, sampled every LAG_PERIOD_S. A request's bytes wait
    in its socket about that long before the loop reads them, and a call's answer about that long
    before the loop writes it: time no gate sees, that its queue deadline must leave room for."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.behind = 0.0
        self._loop = loop
        self._handle = loop.call_later(LAG_PERIOD_S, self._sample, loop.time() + LAG_PERIOD_S)

    def _sample(self, due: float) -> None:
        now = self._loop.time()
        late = max(0.0, now - due)
        self.behind = late if late >= self.behind else self.behind + LAG_FADE * (late - self.behind)
        self._handle = self._loop.call_later(LAG_PERIOD_S, self._sample, now + LAG_PERIOD_S)

    def behind_now(self) -> float:
        return self.behind

    def stop(self) -> None:
        self._handle.cancel()


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
    """FairGate (services/engine/admission.py) for coroutines on one event loop, with the same policy
    (admission_policy.FairBooks: turns round the accounts, returning calls first, shedding past
    `shed_after`). A waiting call is a future, not a parked thread. Every method runs on the loop's
    thread, so the books need no lock.

    The machine's places (MachinePlaces) keep their semantics: the same locks on the same file, so sync
    and async workers of one machine share them, with two changes. Each call takes its place through an
    open file description of its own, from a pool (a sync call uses its thread's; here one thread runs
    every call). And a call whose account's first place is taken retries the lock every few
    milliseconds instead of sleeping in the kernel; a place's rest is an asyncio sleep."""

    def __init__(self, capacity: float = math.inf, per_account: float | None = None,
                 on_wait: Callable[[float], None] | None = None, machine: MachinePlaces | None = None,
                 on_rest: Callable[[float], None] | None = None, shed_after: float = 0.0,
                 on_shed: Callable[[Shed], None] | None = None, lag: Callable[[], float] | None = None):
        self.books: FairBooks[asyncio.Future[None]] = FairBooks(capacity, per_account, shed_after)
        self.on_wait, self.on_rest, self.on_shed = on_wait, on_rest, on_shed
        self.lag = lag   # the loop's lag now (LoopLag.behind), seconds: the deadline leaves room for it
        self.machine = machine
        self._machine_failed = False
        self._descriptions: list[int] = []   # open file descriptions holding no lock, for the next calls

    @property
    def capacity(self) -> float:
        return self.books.capacity

    @property
    def per_account(self) -> float:
        return self.books.per_account

    @contextlib.asynccontextmanager
    async def turn(self, key: Hashable, arrived: float | None = None) -> AsyncIterator[None]:
        """Run the body in `key`'s turn (a nested turn of the same task shares it). `arrived`: when the
        server first saw the call (time.monotonic()), which its queue deadline counts from."""
        if _current.get() is not None:
            yield
            return
        started = time.perf_counter()
        call = _Call(key)
        try:
            await self._enter(call, returning=False, arrived=arrived)
        except Shed as shed:
            if self.on_shed is not None:
                self.on_shed(shed)
            raise
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
        return self.books.queued()

    async def _enter(self, call: _Call, *, returning: bool, arrived: float | None = None) -> None:
        deadline = await self._acquire(call.key, returning=returning, arrived=arrived)
        call.holding = True
        account_id = _account_id(call.key)
        if self.machine is not None and account_id is not None and not returning:
            try:
                await self._take_machine(call, account_id, deadline)
            except OSError:
                if not self._machine_failed:
                    self._machine_failed = True
                    log.exception("machine-wide admission failed; each web process counts alone meanwhile")
            except BaseException:   # shed, or the client went away while it waited: the process place goes back
                call.holding = False
                self._release(call.key)
                raise

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

    async def _take_machine(self, call: _Call, account_id: int, deadline: float) -> None:
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
                slot = self.machine.further_place(fd, account_id, first, include_first=True)
                if slot is not None:
                    call.place, call.fd = Place(slot, account_id, waited=True), fd
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Shed(0.0, 0.0, "its account's places on this machine stayed taken")
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 2, POLL_MAX_S)
        except BaseException:
            self._descriptions.append(fd)
            raise

    async def _acquire(self, key: Hashable, *, returning: bool, arrived: float | None = None) -> float:
        """Takes the process's place, waiting for it; returns by when the call must have started."""
        books = self.books
        if not returning and self.lag is not None and books.shed_after > 0:
            arrived = self._lagged(arrived)
        arrived, late = books.arrival(arrived)
        if late is not None and not returning:
            raise late
        if books.enter_now(key, returning):
            return books.deadline_for(arrived)
        refused = None if returning else books.refuse_on_arrival(key, arrived)
        if refused is not None:
            raise refused
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = Waiter(key, ready, returning, math.inf if returning else books.deadline_for(arrived), arrived)
        _wake(books.queue(waiter))
        try:
            if waiter.deadline == math.inf:
                await ready
            else:
                async with asyncio.timeout(max(0.0, waiter.deadline - books.clock())):
                    await ready
        except TimeoutError:
            # Its place may have come as the wait timed out: the timeout cancels `ready` at once, and a
            # release before this line runs still grants the waiter (its wake then finds `ready` done).
            # The books say which: a waiter no longer queued holds its place, and keeps it.
            if not books.forget(waiter):
                return waiter.deadline
            raise books.shed_of(waiter) from None
        except asyncio.CancelledError:   # the client went away while it waited
            if not books.forget(waiter):
                self._release(key)   # it had been given the place: pass it on
            raise
        return waiter.deadline

    def _release(self, key: Hashable) -> None:
        _wake(self.books.release(key))

    def _lagged(self, arrived: float | None) -> float:
        """When the call is taken to have arrived: a loop running `lag` behind read its bytes about that
        late, and will write its answer about that late too; so its deadline counts from `lag` before
        the handler saw it, and ends `lag` early (issue 40: under 5x overload, 5% of the 503s left past
        the deadline's slack, each waiting on the loop twice)."""
        assert self.lag is not None
        shift = min(2 * self.lag(), self.books.shed_after / 2)   # however late the loop, half the wait is left
        seen = self.books.clock() if arrived is None else arrived
        return seen - shift


def _wake(waiters: list[Waiter[asyncio.Future[None]]]) -> None:
    for waiter in waiters:
        if not waiter.wake.done():
            waiter.wake.set_result(None)


class AsyncOpenGate:
    """No admission control (both limits 0)."""

    @contextlib.asynccontextmanager
    async def turn(self, key: Hashable, arrived: float | None = None) -> AsyncIterator[None]:
        yield

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        yield

    def queued(self) -> int:
        return 0


def _new_gate(loop: asyncio.AbstractEventLoop) -> AsyncFairGate | AsyncOpenGate:
    from plugins_app.services.engine import admission

    capacity, per_account = admission.gate_limits()
    if min(capacity, per_account) == math.inf:
        return AsyncOpenGate()
    shed_after = settings.HUB_ADMISSION.shed_after
    lag = LoopLag(loop).behind_now if shed_after > 0 else None
    return AsyncFairGate(capacity, per_account, on_wait=admission._on_wait, machine=_machine_places(per_account),
                         on_rest=admission._on_rest, shed_after=shed_after, on_shed=admission._on_shed, lag=lag)


# One gate per event loop: its futures belong to that loop.
_gates: PerLoop[AsyncFairGate | AsyncOpenGate] = PerLoop(_new_gate)


def get_gate() -> AsyncFairGate | AsyncOpenGate:
    """This event loop's gate, with the limits and metrics hooks of admission.get_gate()."""
    return _gates.get()


def waiting() -> contextlib.AbstractAsyncContextManager[None]:
    """The running call's `waiting()` (what the async tier enters around each wait on its engine)."""
    return get_gate().waiting()

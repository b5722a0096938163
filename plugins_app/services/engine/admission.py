"""Fair admission of execute calls in a web process: round-robin across accounts, not first come."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator

from django.conf import settings

from plugins_app.runtime.environment import Env
from plugins_app.services.engine.admission_policy import FairBooks, Shed, Waiter
from plugins_app.services.engine.machine_places import MachinePlaces

log = logging.getLogger(__name__)


class FairGate:
    """At most `capacity` calls run at once, at most `per_account` of them one account's; the
    others wait without using the CPU, and a freed place goes to the next *account* in turn
    rather than to the next request (the policy, shedding included, is admission_policy.FairBooks').
    An account with many callers in a closed loop (a runaway tenant's retries, say) then gets one
    turn per round like any other account instead of one per caller.

    A call gives its place back while it waits on an engine (`waiting()`), so a chain that
    holds an isolate for seconds does not hold a place; coming back, it goes before new calls.
    With `shed_after` set, a call that cannot start within that many seconds raises `Shed`.
    """

    def __init__(self, capacity: float = math.inf, per_account: float | None = None,
                 on_wait: Callable[[float], None] | None = None, machine: MachinePlaces | None = None,
                 on_rest: Callable[[float], None] | None = None, shed_after: float = 0.0,
                 on_shed: Callable[[Shed], None] | None = None):
        self.on_wait = on_wait   # hears how long each call waited for its turn (0 when it had not to)
        self.on_rest = on_rest   # hears how long a call rested its account's machine place, when it did
        self.on_shed = on_shed   # hears each call refused for the queue deadline
        self.machine = machine   # when set, an account's places are also counted across the machine
        self.books: FairBooks[threading.Event] = FairBooks(capacity, per_account, shed_after)
        self._machine_failed = False
        self._lock = threading.Lock()
        self._local = threading.local()

    @property
    def capacity(self) -> float:
        return self.books.capacity

    @property
    def per_account(self) -> float:
        return self.books.per_account

    @contextlib.contextmanager
    def turn(self, key: Hashable, arrived: float | None = None) -> Iterator[None]:
        """Run the body in `key`'s turn. Nested turns of one thread (a chain run from inside a
        host call) share the outer turn's place. `arrived`: when the server first saw the call
        (time.monotonic()), which its queue deadline counts from."""
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
            return
        started = time.perf_counter()
        try:
            self._enter(key, returning=False, arrived=arrived)
        except Shed as shed:
            if self.on_shed is not None:
                self.on_shed(shed)
            raise
        if self.on_wait is not None:
            self.on_wait(time.perf_counter() - started)
        self._local.depth, self._local.key, self._local.holding = 1, key, True
        try:
            yield
        finally:
            self._local.depth = 0
            if self._local.holding:
                self._local.holding = False
                self._leave(key)

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Around a wait that needs no CPU of this process: the place goes to someone else."""
        if not getattr(self._local, "holding", False):
            yield
            return
        self._local.holding = False
        self._leave(self._local.key)
        try:
            yield
        finally:
            self._enter(self._local.key, returning=True)
            self._local.holding = True

    def queued(self) -> int:
        with self._lock:
            return self.books.queued()

    def _enter(self, key: Hashable, *, returning: bool, arrived: float | None = None) -> None:
        """The process's place first, then the machine's: a call blocked on another process
        holds one thread of this one, and none of the account's other callers here. A call coming
        back from its engine needs no machine place: the engine bounds how many can, and the
        kernel's lock is not first come, so it could wait behind its account's new calls."""
        deadline = self._acquire(key, returning=returning, arrived=arrived)
        self._local.place = None
        account_id = _account_id(key)
        if self.machine is not None and account_id is not None and not returning:
            try:
                self._local.place = self.machine.take(account_id, deadline=deadline)
            except Shed:
                self._release(key)
                raise
            except OSError:   # the shared file is gone or unwritable: this process's limit still holds
                if not self._machine_failed:   # once: it would fail the same way on every call
                    self._machine_failed = True
                    log.exception("machine-wide admission failed; each web process counts alone meanwhile")

    def _leave(self, key: Hashable) -> None:
        """The process's place first: a place resting (see MachinePlaces) keeps no one here out."""
        place, self._local.place = self._local.place, None
        self._release(key)
        if place is not None and self.machine is not None:
            rested = self.machine.give_back(place)
            if rested and self.on_rest is not None:
                self.on_rest(rested)

    def _acquire(self, key: Hashable, *, returning: bool, arrived: float | None = None) -> float:
        """Takes the process's place, waiting for it; returns by when the call must have started."""
        books = self.books
        with self._lock:
            arrived, late = books.arrival(arrived)
            if late is not None and not returning:
                raise late
            if books.enter_now(key, returning):   # nobody waits: take the place, no event needed
                return books.deadline_for(arrived)
            refused = None if returning else books.refuse_on_arrival(key, arrived)
            if refused is not None:
                raise refused
            waiter = Waiter(key, threading.Event(), returning, math.inf if returning else books.deadline_for(arrived),
                            arrived)
            woken = books.queue(waiter)
        _wake(woken)
        if waiter.deadline == math.inf:
            waiter.wake.wait()
        elif not waiter.wake.wait(max(0.0, waiter.deadline - books.clock())):
            with self._lock:
                gone = books.forget(waiter)   # False: its place came as the wait timed out; it keeps it
            if gone:
                raise books.shed_of(waiter)
        return waiter.deadline

    def _release(self, key: Hashable) -> None:
        with self._lock:
            woken = self.books.release(key)
        _wake(woken)


def _wake(waiters: list[Waiter[threading.Event]]) -> None:
    for waiter in waiters:
        waiter.wake.set()


def _account_id(key: Hashable) -> int | None:
    """The account a line (see line_for) is, if it is known to be one."""
    if isinstance(key, tuple) and len(key) == 2 and key[0] == "account" and isinstance(key[1], int):
        return key[1]
    return None


class OpenGate:
    """No admission control (both limits 0)."""

    @contextlib.contextmanager
    def turn(self, key: Hashable, arrived: float | None = None) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        yield

    def queued(self) -> int:
        return 0


_gate: FairGate | OpenGate | None = None
_gate_lock = threading.Lock()
# Who hears each call's wait, rest and shedding (the metrics); set by the app's ready() before the gate is made.
_on_wait: Callable[[float], None] | None = None
_on_rest: Callable[[float], None] | None = None
_on_shed: Callable[[Shed], None] | None = None


def configure(*, on_wait: Callable[[float], None], on_rest: Callable[[float], None],
              on_shed: Callable[[Shed], None] | None = None) -> None:
    global _on_wait, _on_rest, _on_shed
    _on_wait, _on_rest, _on_shed = on_wait, on_rest, on_shed


def gate_limits() -> tuple[float, float]:
    """(capacity, per_account) from HUB_EXECUTE_CONCURRENCY and HUB_EXECUTE_CONCURRENCY_PER_ACCOUNT
    (0 = no such limit); both unlimited, and there is no gate."""
    return settings.HUB_ADMISSION.concurrency or math.inf, settings.HUB_ADMISSION.per_account or math.inf


def get_gate() -> FairGate | OpenGate:
    """This process's gate: HUB_EXECUTE_CONCURRENCY calls at once, HUB_EXECUTE_CONCURRENCY_PER_ACCOUNT
    of them one account's, a call not started within HUB_EXECUTE_QUEUE_DEADLINE_MS shed."""
    global _gate
    if _gate is None:
        with _gate_lock:
            if _gate is None:
                capacity, per_account = gate_limits()
                _gate = (FairGate(capacity, per_account, on_wait=_on_wait, machine=_machine_places(per_account),
                                  on_rest=_on_rest, shed_after=settings.HUB_ADMISSION.shed_after, on_shed=_on_shed)
                         if min(capacity, per_account) < math.inf else OpenGate())
    return _gate


def _machine_places(per_account: float) -> MachinePlaces | None:
    """Accounts share the machine's places when its web processes share an engine tier
    (HUB_ENGINE_DIR, set by gunicorn.conf.py) and HUB_EXECUTE_PER_ACCOUNT_SCOPE is "machine"."""
    directory = Env(os.environ).text("HUB_ENGINE_DIR")
    if settings.HUB_ADMISSION.per_account_scope != "machine" or not directory or per_account == math.inf:
        return None
    capacity = settings.HUB_ADMISSION.machine_places or len(os.sched_getaffinity(0))
    return MachinePlaces(os.path.join(directory, "admission.lock"), capacity,
                         rest_factor=settings.HUB_ADMISSION.rest_factor,
                         max_rest=settings.HUB_ADMISSION.max_rest_ms / 1000)


# Which account an API key prefix belongs to, learnt from authenticated calls, so a second key
# of the same account waits in the same line. Bounded: a forged prefix is never learnt.
MAX_KNOWN_KEYS = 10_000
_account_of: OrderedDict[str, int] = OrderedDict()
_known_lock = threading.Lock()


def line_for(key_prefix: str | None) -> Hashable:
    if key_prefix is None:
        return ("unauthenticated",)
    with _known_lock:
        account_id = _account_of.get(key_prefix)
    return ("account", account_id) if account_id is not None else ("key", key_prefix)


def learn(key_prefix: str, account_id: int) -> None:
    with _known_lock:
        _account_of[key_prefix] = account_id
        _account_of.move_to_end(key_prefix)
        while len(_account_of) > MAX_KNOWN_KEYS:
            _account_of.popitem(last=False)

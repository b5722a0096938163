"""Fair admission of execute calls in a web process: round-robin across accounts, not first come."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterator

from django.conf import settings

from plugins_app.runtime.environment import Env
from plugins_app.services.engine.machine_places import MachinePlaces

log = logging.getLogger(__name__)


class FairGate:
    """At most `capacity` calls run at once, at most `per_account` of them one account's; the
    others wait without using the CPU, and a freed place goes to the next *account* in turn
    rather than to the next request. An account with many callers in a closed loop (a runaway
    tenant's retries, say) then gets one turn per round like any other account instead of one
    per caller.

    A call gives its place back while it waits on an engine (`waiting()`), so a chain that
    holds an isolate for seconds does not hold a place; coming back, it goes before new calls.
    """

    def __init__(self, capacity: float = math.inf, per_account: float | None = None,
                 on_wait: Callable[[float], None] | None = None, machine: MachinePlaces | None = None,
                 on_rest: Callable[[float], None] | None = None):
        self.capacity = capacity
        self.on_wait = on_wait   # hears how long each call waited for its turn (0 when it had not to)
        self.on_rest = on_rest   # hears how long a call rested its account's machine place, when it did
        self.per_account = per_account or capacity   # places one account may hold at once
        self.machine = machine   # when set, an account's places are also counted across the machine
        self._machine_failed = False
        self._lock = threading.Lock()
        self._running = 0
        self._held: dict[Hashable, int] = {}
        self._returning: deque[tuple[Hashable, threading.Event]] = deque()
        self._waiting: OrderedDict[Hashable, deque[threading.Event]] = OrderedDict()
        self._local = threading.local()

    @contextlib.contextmanager
    def turn(self, key: Hashable) -> Iterator[None]:
        """Run the body in `key`'s turn. Nested turns of one thread (a chain run from inside a
        host call) share the outer turn's place."""
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
            return
        started = time.perf_counter()
        self._enter(key, returning=False)
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
            return len(self._returning) + sum(len(q) for q in self._waiting.values())

    def _enter(self, key: Hashable, *, returning: bool) -> None:
        """The process's place first, then the machine's: a call blocked on another process
        holds one thread of this one, and none of the account's other callers here. A call coming
        back from its engine needs no machine place: the engine bounds how many can, and the
        kernel's lock is not first come, so it could wait behind its account's new calls."""
        self._acquire(key, returning=returning)
        self._local.place = None
        account_id = _account_id(key)
        if self.machine is not None and account_id is not None and not returning:
            try:
                self._local.place = self.machine.take(account_id)
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

    def _acquire(self, key: Hashable, *, returning: bool) -> None:
        with self._lock:
            if self._free_now(key, returning):   # nobody waits: take the place, no event needed
                self._grant(key)
                return
            ready = threading.Event()
            if returning:   # finishing a call goes before starting one, whatever its account holds
                self._returning.append((key, ready))
            else:
                self._waiting.setdefault(key, deque()).append(ready)
            woken = self._dispatch()
        for event in woken:
            event.set()
        ready.wait()   # set at once when a place was free

    def _free_now(self, key: Hashable, returning: bool) -> bool:
        """Whether _dispatch would hand `key` a place at once, were it queued (the lock is held)."""
        if self._running >= self.capacity or self._returning:
            return False
        return returning or (not self._waiting and self._held.get(key, 0) < self.per_account)

    def _release(self, key: Hashable) -> None:
        with self._lock:
            self._running -= 1
            left = self._held[key] - 1
            if left:
                self._held[key] = left
            else:
                del self._held[key]
            woken = self._dispatch()
        for event in woken:
            event.set()

    def _dispatch(self) -> list[threading.Event]:
        """Hands free places out: returning calls first, then accounts in turn order, skipping an
        account that holds its share already."""
        woken = []
        while self._running < self.capacity:
            picked = self._pick()
            if picked is None:
                break
            woken.append(picked)
        return woken

    def _pick(self) -> threading.Event | None:
        if self._returning:
            key, ready = self._returning.popleft()
        else:
            key = next((k for k in self._waiting if self._held.get(k, 0) < self.per_account), None)
            if key is None:
                return None
            queue = self._waiting[key]
            ready = queue.popleft()
            if queue:
                self._waiting.move_to_end(key)   # its next caller waits for every other account's turn
            else:
                del self._waiting[key]
        self._grant(key)
        return ready

    def _grant(self, key: Hashable) -> None:
        self._running += 1
        self._held[key] = self._held.get(key, 0) + 1


def _account_id(key: Hashable) -> int | None:
    """The account a line (see line_for) is, if it is known to be one."""
    if isinstance(key, tuple) and len(key) == 2 and key[0] == "account" and isinstance(key[1], int):
        return key[1]
    return None


class OpenGate:
    """No admission control (both limits 0)."""

    @contextlib.contextmanager
    def turn(self, key: Hashable) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        yield

    def queued(self) -> int:
        return 0


_gate: FairGate | OpenGate | None = None
_gate_lock = threading.Lock()
# Who hears each call's wait and rest (the metrics); set by the app's ready() before the gate is made.
_on_wait: Callable[[float], None] | None = None
_on_rest: Callable[[float], None] | None = None


def configure(*, on_wait: Callable[[float], None], on_rest: Callable[[float], None]) -> None:
    global _on_wait, _on_rest
    _on_wait, _on_rest = on_wait, on_rest


def get_gate() -> FairGate | OpenGate:
    """This process's gate: HUB_EXECUTE_CONCURRENCY calls at once, HUB_EXECUTE_CONCURRENCY_PER_ACCOUNT
    of them one account's (0 = no such limit; both 0, no gate)."""
    global _gate
    if _gate is None:
        with _gate_lock:
            if _gate is None:
                capacity = settings.HUB_ADMISSION.concurrency or math.inf
                per_account = settings.HUB_ADMISSION.per_account or math.inf
                _gate = (FairGate(capacity, per_account, on_wait=_on_wait,
                                  machine=_machine_places(per_account), on_rest=_on_rest)
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

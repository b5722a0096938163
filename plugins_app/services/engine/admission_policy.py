"""Fair admission's policy, shared by the thread gate and the event-loop gate: whose turn is next, and which calls are shed.

No Django and no way of waiting here: FairGate (threads, admission.py) and AsyncFairGate (one event
loop, async_admission.py) each keep a `FairBooks` and wake their own kind of waiter (an Event, a
future) with what it hands back. The books are not locked: the thread gate holds its lock around
every call, and the loop's gate runs them all on its one thread.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

W = TypeVar("W")   # what a gate wakes a waiting call with: threading.Event, asyncio.Future

# How much one new interval between an account's turns moves its estimate (an EWMA): a few turns
# follow a change of load, one slow turn does not shed a burst on its own.
INTERVAL_WEIGHT = 0.3


class Shed(Exception):
    """The call could not start within the queue deadline: it was not run, and may be sent again."""

    def __init__(self, waited: float, deadline: float, reason: str):
        super().__init__(reason)
        self.waited, self.deadline, self.reason = waited, deadline, reason


@dataclass(eq=False)
class Waiter(Generic[W]):
    """One queued call: its line, what wakes it, and by when it must start (monotonic; inf: no limit)."""

    key: Hashable
    wake: W
    returning: bool
    deadline: float = math.inf
    queued_at: float = field(default_factory=time.monotonic)


@dataclass
class _Pace:
    """How often a backlogged account gets a turn: the seconds between its last grants, smoothed."""

    last: float
    interval: float = 0.0


class FairBooks(Generic[W]):
    """At most `capacity` calls run at once, at most `per_account` of them one key's (account's). A freed
    place goes to a call coming back from its engine first (it has started: finishing goes before
    starting), then to the next *key* in turn, so an account with many callers gets one turn per round
    like any other.

    Shedding (`shed_after` > 0 seconds): a new call that has not started within `shed_after` of its
    arrival is taken out of the queue and refused (`Shed`), and one that cannot start in time by the
    pace its account is getting turns at (its calls queued ahead of it times the interval between its
    turns) is refused on arrival. Turns go round the accounts, so an account within its fair share
    waits about one round and is not shed; one sending past its share builds a queue of its own, and
    only that queue's excess is refused: accounts are shed in proportion to their excess. A returning
    call is never shed. With every queue bounded by the deadline, the books hold nothing older than
    `shed_after` when the load falls, so the hub answers at its normal pace again within that.
    """

    def __init__(self, capacity: float = math.inf, per_account: float | None = None, shed_after: float = 0.0,
                 clock: Callable[[], float] = time.monotonic):
        self.capacity = capacity
        self.per_account = per_account or capacity
        self.shed_after = shed_after
        self.clock = clock
        self.running = 0
        self.held: dict[Hashable, int] = {}
        self.returning: deque[Waiter[W]] = deque()
        self.waiting: OrderedDict[Hashable, deque[Waiter[W]]] = OrderedDict()
        self._pace: dict[Hashable, _Pace] = {}

    # -- a call arriving --------------------------------------------------------------------------------

    def enter_now(self, key: Hashable, returning: bool) -> bool:
        """Takes the place at once when the dispatch would hand it to `key`, were it queued."""
        if self.running >= self.capacity or self.returning:
            return False
        if not returning and (self.waiting or self.held.get(key, 0) >= self.per_account):
            return False
        self._grant(key, waited=False)
        return True

    def deadline_for(self, arrived: float) -> float:
        return arrived + self.shed_after if self.shed_after > 0 else math.inf

    def arrival(self, arrived: float | None) -> tuple[float, Shed | None]:
        """When a new call arrived (`arrived`: as the server first saw it, if it knows; else now), and
        why it is refused at once if its deadline passed before it even reached admission: a server
        behind its load queues calls where no gate sees them (its event loop, its threads)."""
        now = self.clock()
        arrived = now if arrived is None else min(arrived, now)
        if self.shed_after <= 0 or now - arrived < self.shed_after:
            return arrived, None
        return arrived, Shed(now - arrived, self.shed_after,
                             f"it waited {(now - arrived) * 1000:.0f} ms before it reached admission")

    def refuse_on_arrival(self, key: Hashable, arrived: float | None = None) -> Shed | None:
        """Why a new call of `key` (that reached the server at `arrived`) cannot start within its deadline
        by its account's pace, or None: refused now, it costs the hub nothing more and its caller learns
        at once rather than at the deadline."""
        if self.shed_after <= 0:
            return None
        pace, ahead = self._pace.get(key), len(self.waiting.get(key, ()))
        if pace is None or not ahead or not pace.interval:
            return None
        now = self.clock()
        already = 0.0 if arrived is None else max(0.0, now - arrived)
        if already + (ahead + 1) * pace.interval <= self.shed_after:
            return None
        return Shed(already, self.shed_after, f"{ahead} calls of this account are queued ahead of it, and it gets a "
                                              f"turn every {pace.interval * 1000:.0f} ms")

    def queue(self, waiter: Waiter[W]) -> list[Waiter[W]]:
        """Queues a call that could not enter at once; returns the waiters to wake (its own, if a place was free)."""
        if waiter.returning:
            self.returning.append(waiter)
        else:
            self.waiting.setdefault(waiter.key, deque()).append(waiter)
        return self.dispatch()

    def forget(self, waiter: Waiter[W]) -> bool:
        """Takes a queued call out (its deadline passed, or its client went away); False when it is no
        longer queued: it was given its place meanwhile, and must use or release it."""
        if waiter.returning:
            try:
                self.returning.remove(waiter)
            except ValueError:
                return False
            return True
        line = self.waiting.get(waiter.key)
        if line is None or waiter not in line:
            return False
        line.remove(waiter)
        if not line:
            self._drop_line(waiter.key)
        return True

    def shed_of(self, waiter: Waiter[W], now: float | None = None) -> Shed:
        now = self.clock() if now is None else now
        return Shed(now - waiter.queued_at, self.shed_after,
                    f"it waited {(now - waiter.queued_at) * 1000:.0f} ms for its account's turn")

    # -- a call leaving ---------------------------------------------------------------------------------

    def release(self, key: Hashable) -> list[Waiter[W]]:
        """Gives `key`'s place back; returns the waiters to wake."""
        self.running -= 1
        left = self.held[key] - 1
        if left:
            self.held[key] = left
        else:
            del self.held[key]
        return self.dispatch()

    def dispatch(self) -> list[Waiter[W]]:
        """Hands free places out: returning calls first, then keys in turn order, skipping a key that
        holds its share already."""
        woken = []
        while self.running < self.capacity:
            picked = self._pick()
            if picked is None:
                break
            woken.append(picked)
        return woken

    def queued(self) -> int:
        return len(self.returning) + sum(len(line) for line in self.waiting.values())

    def _pick(self) -> Waiter[W] | None:
        if self.returning:
            waiter = self.returning.popleft()
        else:
            key = next((k for k in self.waiting if self.held.get(k, 0) < self.per_account), None)
            if key is None:
                return None
            line = self.waiting[key]
            waiter = line.popleft()
            self._grant(key, waited=True)   # paced before the line may go: its pace goes with it
            if line:
                self.waiting.move_to_end(key)   # its next caller waits for every other account's turn
            else:
                self._drop_line(key)
            return waiter
        self._grant(waiter.key, waited=False)
        return waiter

    def _grant(self, key: Hashable, *, waited: bool) -> None:
        self.running += 1
        self.held[key] = self.held.get(key, 0) + 1
        if waited and self.shed_after > 0:
            self._paced(key)

    def _paced(self, key: Hashable) -> None:
        """A queued call of `key` got its turn: the interval since its account's last one joins its pace."""
        now = self.clock()
        pace = self._pace.get(key)
        if pace is None:
            self._pace[key] = _Pace(now)
            return
        gap = now - pace.last
        pace.interval = gap if not pace.interval else pace.interval + INTERVAL_WEIGHT * (gap - pace.interval)
        pace.last = now

    def _drop_line(self, key: Hashable) -> None:
        # An account with nothing queued has no pace: its next burst is measured afresh.
        del self.waiting[key]
        self._pace.pop(key, None)

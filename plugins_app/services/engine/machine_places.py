"""An account's places shared by every web process of a machine: byte-range locks on one file."""

from __future__ import annotations

import fcntl
import math
import os
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from plugins_app.services.engine.admission_policy import Shed

# A call waiting for its account's place until a deadline tries the kernel's lock again after this
# long, doubling up to the ceiling (the kernel's own wait has no timeout). The lock was never first
# come, so polling loses no order it had.
POLL_FIRST_S = 0.001
POLL_MAX_S = 0.02

# struct flock on Linux (x86-64 and arm64): l_type, l_whence, l_start, l_len, l_pid, padded to 32.
_FLOCK = struct.Struct("@hhqqi4x")
_OFFSETS = 2 ** 62   # a lock offset must fit in off_t, whatever an account's id

# Bumped in a forked child: a description opened before the fork is the parent's (and shared
# with it), so the child opens its own. Counted here rather than asking getpid() on every call.
_forks = 0


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


@dataclass(slots=True)
class Place:
    """One of an account's places, as taken: given back with MachinePlaces.give_back."""

    slot: int
    account_id: int
    waited: bool   # the account's first place was taken when the call came
    taken_at: float = field(default_factory=time.monotonic)


class MachinePlaces:
    """Places for calls that run Python, shared by the machine's web processes, dealt by fair
    share: an account gets `capacity` places divided by the number of accounts running, and
    always one. A lone tenant can then use the whole machine, while a tenant retrying from many
    connections beside others runs one call at a time, however many web workers it reaches.

    A place is one byte of `path` locked with an open-file-description lock: it conflicts with
    every other thread's (each thread opens the file itself), the kernel frees it if its process
    dies, a waiter sleeps in the kernel without the GIL, and the accounts running are read from
    the locks themselves (F_OFD_GETLK), so there is no count to drift.

    One place bounds an account's calls in progress, not its calls per second: a tenant calling
    from many connections keeps its place busy all the time, where a single caller holds it only
    part of the time, and the machine's cost is per call. So a call that found its account's place
    taken rests it, `rest_factor` times as long as it held it (at most `max_rest` seconds), before
    giving it back while other accounts run: the account's next calls wait, and the tenant gets
    about one caller's share of calls. Alone on the machine, an account never rests."""

    def __init__(self, path: str | Path, capacity: int, rest_factor: float = 0.0, max_rest: float = 0.1):
        self.path = str(path)
        self.capacity = max(1, capacity)   # also the most places one account can hold
        self.rest_factor, self.max_rest = rest_factor, max_rest
        self._local = threading.local()

    def take(self, account_id: int, deadline: float = math.inf) -> Place:
        """Blocks until one of the account's places is this thread's; returns it for give_back. With a
        `deadline` (time.monotonic()), raises Shed when none is free by then."""
        fd = self._fd()
        first = self._first_slot(account_id)
        if _lock(fd, first, wait=False):
            return Place(first, account_id, waited=False)
        if deadline == math.inf:
            slot = self.further_place(fd, account_id, first)
            if slot is None:
                _lock(fd, first, wait=True)
            return Place(first if slot is None else slot, account_id, waited=True)
        # The kernel's wait has no timeout: poll, as the async gate does, until the deadline.
        pause = POLL_FIRST_S
        while True:
            slot = self.further_place(fd, account_id, first, include_first=True)
            if slot is not None:
                return Place(slot, account_id, waited=True)
            left = deadline - time.monotonic()
            if left <= 0:
                raise Shed(0.0, 0.0, "its account's places on this machine stayed taken")
            time.sleep(min(pause, left))
            pause = min(pause * 2, POLL_MAX_S)

    def further_place(self, fd: int, account_id: int, first: int, *, include_first: bool = False) -> int | None:
        """The account runs elsewhere already: a further place only while its fair share (the machine's
        places divided among the accounts running) allows one. Locked through `fd` and returned, or None."""
        share = self.capacity // (self.accounts_running(besides=account_id) + 1)
        for slot in (first, *range(first + 1, first + share)) if include_first else range(first + 1, first + share):
            if _lock(fd, slot, wait=False):
                return slot
        return None

    def give_back(self, place: Place) -> float:
        """Unlocks the place, after its rest if it has one; returns the seconds rested."""
        rest = self.rest_for(place)
        if rest:
            time.sleep(rest)
        fcntl.fcntl(self._fd(), fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, place.slot, 1, 0))
        return rest

    def rest_for(self, place: Place) -> float:
        if not place.waited or not self.rest_factor:
            return 0.0
        held = time.monotonic() - place.taken_at
        if not self.accounts_running(besides=place.account_id):   # alone: the machine is its own
            return 0.0
        return min(held * self.rest_factor, self.max_rest)

    def accounts_running(self, besides: int | None = None) -> int:
        """How many accounts (but `besides`) hold a place held by another thread, up to capacity."""
        fd, skip = self._fd(), None if besides is None else self._first_slot(besides)
        count, ranges = 0, [(0, _OFFSETS)]
        # The kernel reports *a* conflicting lock in a range, not the lowest: split around each.
        while ranges and count < self.capacity:
            start, end = ranges.pop()
            held = _a_lock_within(fd, start, end)
            if held is None:
                continue
            first = held - held % self.capacity
            count += first != skip
            ranges += [(start, first), (first + self.capacity, end)]
        return count

    def _first_slot(self, account_id: int) -> int:
        return account_id * self.capacity % (_OFFSETS - _OFFSETS % self.capacity)

    def _fd(self) -> int:
        # One open file description per thread and per process: a description inherited across
        # fork, or shared by two threads, would hold the lock for both.
        held = getattr(self._local, "description", None)
        if held is None or held.forks != _forks:
            held = self._local.description = _Description(self.path)
        return held.fd


class _Description:
    """A thread's open file; closed (its locks with it) when the thread's locals go."""

    def __init__(self, path: str):
        self.forks = _forks
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def __del__(self) -> None:
        if self.forks == _forks and hasattr(self, "fd"):   # (no fd when the open failed)
            os.close(self.fd)


def _lock(fd: int, slot: int, *, wait: bool) -> bool:
    request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, slot, 1, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK, request)
    except (BlockingIOError, PermissionError):   # another description holds it (never when waiting)
        return False
    return True


def _a_lock_within(fd: int, start: int, end: int) -> int | None:
    """The offset of a byte in [start, end) that another description has locked, if any."""
    if start >= end:
        return None
    probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, start, end - start, 0)
    l_type, _, l_start, _, _ = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_OFD_GETLK, probe))
    return None if l_type == fcntl.F_UNLCK else max(l_start, start)

"""The shared engines' board: which account each one is running, so one account holds at most one of them,
and the account each one last found keeping memory, so the others send it to the lane too."""

from __future__ import annotations

import functools
import hashlib
import mmap
import os
import struct
import time

# One seat per shared engine: the running account's key (0: nothing runs) and when its chain
# started (CLOCK_MONOTONIC nanoseconds, the same clock in every process of the machine); then the
# account it last found keeping memory and until when it goes to the lane (0, 0: none).
SEAT = struct.Struct("=QQQQ")
_PAIR = struct.Struct("=QQ")   # one half of a seat: (account key, time)
_KEEPER_OFFSET = _PAIR.size


@functools.lru_cache(maxsize=4096)   # asked at every chain's start and admission: hash an account once
def account_key(account: str) -> int:
    """A nonzero 64-bit key for an account: the board holds numbers, not names."""
    return int.from_bytes(hashlib.blake2b(account.encode(), digest_size=8).digest(), "little") or 1


def create(path: str, seats: int) -> int:
    """Makes the board file for `seats` engines (all idle) and returns a descriptor to hand them."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.ftruncate(fd, SEAT.size * max(1, seats))
    return fd


class Board:
    """An engine's view of the board: it writes its own seat and reads the others'. Advisory: a
    torn read or a seat left by an engine that died costs at most one call a trip to the lane."""

    def __init__(self, fd: int, seat: int):
        self.seat = seat
        self._map = mmap.mmap(fd, os.fstat(fd).st_size)
        self.seats = len(self._map) // SEAT.size
        if not 0 <= seat < self.seats:
            raise ValueError(f"seat {seat} is not on a board of {self.seats}")
        self.clear()   # whatever a dead predecessor left in this seat

    def hold(self, account: str) -> None:
        _PAIR.pack_into(self._map, self.seat * SEAT.size, account_key(account), time.monotonic_ns())

    def release(self) -> None:
        _PAIR.pack_into(self._map, self.seat * SEAT.size, 0, 0)

    def clear(self) -> None:
        """The whole seat emptied (a new engine in it)."""
        SEAT.pack_into(self._map, self.seat * SEAT.size, 0, 0, 0, 0)

    def keeper(self, account: str, seconds: float) -> None:
        """This engine found `account` keeping memory: every shared engine sends it to the lane for `seconds`."""
        _PAIR.pack_into(self._map, self.seat * SEAT.size + _KEEPER_OFFSET, account_key(account),
                          time.monotonic_ns() + int(seconds * 1e9))

    def keeps_memory(self, account: str) -> bool:
        """Whether some shared engine found `account` keeping memory lately (its own seat included)."""
        key, now = account_key(account), time.monotonic_ns()
        for seat in range(self.seats):
            held, until = _PAIR.unpack_from(self._map, seat * SEAT.size + _KEEPER_OFFSET)
            if held == key and until > now:
                return True
        return False

    def held_elsewhere(self, account: str, longer_than: float) -> bool:
        """Whether another engine has been running a chain of `account` for over `longer_than` seconds."""
        key = account_key(account)
        since = time.monotonic_ns() - int(longer_than * 1e9)
        for seat in range(self.seats):
            if seat == self.seat:
                continue
            held, started = _PAIR.unpack_from(self._map, seat * SEAT.size)
            if held == key and 0 < started < since:
                return True
        return False

    def close(self) -> None:
        self.clear()
        self._map.close()

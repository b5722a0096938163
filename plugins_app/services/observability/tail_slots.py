"""Live tail slots shared by every web process of a machine, a share per account: byte-range locks on one file."""

from __future__ import annotations

import fcntl
import os
import struct
from dataclasses import dataclass
from pathlib import Path

# struct flock on Linux (x86-64 and arm64), as services/engine/machine_places.py reads it.
_FLOCK = struct.Struct("@hhqqi4x")
_MUTEX = 0          # held for the moment of an admission, so two processes never both take the last slot
_SLOTS = 1          # the machine's slots: bytes 1 .. capacity
_ACCOUNTS = 1 << 20   # each account's bytes: from here, `per_account` bytes per account
_OFFSETS = 2 ** 62


class Refused(Exception):
    """No slot for this account now; the message says why."""


@dataclass(frozen=True)
class Share:
    """How many slots one account may hold of `capacity`: at most half, and never the last `reserve`
    free ones while it holds one already (those stay for accounts that hold none)."""

    capacity: int
    per_account: int
    reserve: int

    @classmethod
    def of(cls, capacity: int) -> Share:
        return cls(capacity, max(1, capacity // 2), max(1, capacity // 8))

    def refusal(self, held_by_account: int, held: int) -> str | None:
        if held_by_account >= self.per_account:
            return f"this account already holds {held_by_account} live tails, its share of {self.capacity}; close one first"
        free = self.capacity - held
        if free <= 0:
            return "every live tail this server holds is taken; try again shortly"
        if held_by_account and free - 1 < self.reserve:
            return (f"the last {self.reserve} live tail{'s' if self.reserve > 1 else ''} here stay for accounts that "
                    "hold none; close one of yours first")
        return None


class Slot:
    """One stream's hold on a machine slot and on one of its account's; close() (or the process's end)
    gives both back. Slot(None) holds nothing (no slot file could be used)."""

    def __init__(self, fd: int | None):
        self._fd: int | None = fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)   # closing the description drops its locks
            self._fd = None


class MachineSlots:
    """A slot is a locked byte of `path`, held by an open file description of the stream's own, so
    the kernel frees it if the process dies and the count is read from the locks (no count to drift).
    Every web process of the machine opens the same file: the share and the cap hold across them."""

    def __init__(self, path: str | Path, capacity: int):
        self.path = str(path)
        self.share = Share.of(capacity)

    def take(self, account_id: int) -> Slot:
        """A slot for one of the account's streams, or Refused."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            _lock(fd, _MUTEX, wait=True)
            try:
                first = _ACCOUNTS + account_id * self.share.per_account % (_OFFSETS - _ACCOUNTS)
                mine = [first + k for k in range(self.share.per_account)]
                slots = [_SLOTS + k for k in range(self.share.capacity)]
                mine_free = [b for b in mine if not _held(fd, b)]
                free = [b for b in slots if not _held(fd, b)]
                reason = self.share.refusal(len(mine) - len(mine_free), len(slots) - len(free))
                if reason:
                    raise Refused(reason)
                if not (_lock(fd, free[0], wait=False) and _lock(fd, mine_free[0], wait=False)):
                    raise Refused("every live tail this server holds is taken; try again shortly")
            finally:
                _unlock(fd, _MUTEX)
        except BaseException:
            os.close(fd)
            raise
        return Slot(fd)

    def held(self, account_id: int | None = None) -> int:
        """Slots held on the machine (by `account_id`'s streams, when given)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if account_id is None:
                return sum(_held(fd, _SLOTS + k) for k in range(self.share.capacity))
            first = _ACCOUNTS + account_id * self.share.per_account % (_OFFSETS - _ACCOUNTS)
            return sum(_held(fd, first + k) for k in range(self.share.per_account))
        finally:
            os.close(fd)


def _lock(fd: int, offset: int, *, wait: bool) -> bool:
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK,
                    _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0))
    except (BlockingIOError, PermissionError):
        return False
    return True


def _unlock(fd: int, offset: int) -> None:
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, offset, 1, 0))


def _held(fd: int, offset: int) -> bool:
    """Another description (another stream, in this process or another) holds the byte."""
    probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0)
    return _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_OFD_GETLK, probe))[0] != fcntl.F_UNLCK

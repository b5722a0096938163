"""An account's places shared by every web process of a machine: byte-range locks on one file."""

from __future__ import annotations

import fcntl
import os
import random
import struct
import threading
from pathlib import Path

# struct flock on Linux (x86-64 and arm64): l_type, l_whence, l_start, l_len, l_pid, padded to 32.
_FLOCK = struct.Struct("@hhqqi4x")
_OFFSETS = 2 ** 62   # a lock offset must fit in off_t, whatever an account's id


class MachinePlaces:
    """`per_account` places per account for the whole machine. A place is one byte of `path`
    locked with an open-file-description lock: it conflicts with every other thread's (each
    thread opens the file itself), the kernel frees it if its process dies, and a waiter sleeps
    in the kernel without the GIL. Unlike a process-local count, the web workers then share one
    limit: an account with many callers can't take one place in each worker."""

    def __init__(self, path: str | Path, per_account: int = 1):
        self.path = str(path)
        self.per_account = max(1, per_account)
        self._local = threading.local()

    def take(self, account_id: int) -> int:
        """Blocks until one of the account's places is this thread's; returns it for give_back."""
        fd = self._fd()
        first = account_id * self.per_account
        start = random.randrange(self.per_account)
        slots = [(first + (start + k) % self.per_account) % _OFFSETS for k in range(self.per_account)]
        for slot in slots:
            if _lock(fd, slot, wait=False):
                return slot
        _lock(fd, slots[0], wait=True)
        return slots[0]

    def give_back(self, slot: int) -> None:
        fcntl.fcntl(self._fd(), fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, slot, 1, 0))

    def _fd(self) -> int:
        # One open file description per thread and per process: a description inherited across
        # fork, or shared by two threads, would hold the lock for both.
        held = getattr(self._local, "description", None)
        if held is None or held.pid != os.getpid():
            held = self._local.description = _Description(self.path)
        return held.fd


class _Description:
    """A thread's open file; closed (its locks with it) when the thread's locals go."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.pid = os.getpid()

    def __del__(self):
        if self.pid == os.getpid():
            os.close(self.fd)


def _lock(fd: int, slot: int, *, wait: bool) -> bool:
    request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, slot, 1, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK, request)
    except (BlockingIOError, PermissionError):   # another description holds it (never when waiting)
        return False
    return True

"""An engine's pulse: a small file beside its socket that its event loop stamps several times a
second, read by the supervisor (to replace an engine that stopped) and by web processes (to stop
waiting on one, and to send calls elsewhere), so that silence is judged on the engine's own evidence.

The loop that stamps it is not the isolate's thread: a handler spinning in V8 leaves it beating (the
engine stops that handler itself and says so in the trace); only a process that is stopped, hung or
dead falls silent. A web process never kills an engine: it only stops waiting for it."""

from __future__ import annotations

import mmap
import os
import struct
import time

# (pid, state, stamp): state STARTING with the moment the supervisor started the process, or BEATING
# with the engine's last beat. CLOCK_MONOTONIC seconds: the same clock in every process of the machine.
RECORD = struct.Struct("=qqd")
STARTING, BEATING = 1, 2

BEAT_SECONDS = 0.25      # how often an engine's loop stamps its pulse
SILENT_SECONDS = 1.5     # no beat for this long: web processes stop waiting and send calls elsewhere
# An engine being started (Python, mini-racer, its first isolate) is given this long to beat before
# it counts as silent: as long as a web process waits to connect to one.
START_GRACE_SECONDS = 30.0
# No beat for this long and the supervisor replaces the engine: long enough that a machine starved
# of CPU for a moment does not lose its engines' compartments, short enough that a hung one is gone
# before the platform has retried many times.
HUNG_SECONDS = 10.0
# Routing asks about every engine on each call: the answer is kept this long (a beat is 0.25 s apart).
VERDICT_SECONDS = 0.05


def pulse_path(address: str) -> str:
    """Where the pulse of the engine serving the socket `address` is."""
    return f"{address}.pulse"


def create(path: str) -> int:
    """Makes a pulse file (never shrinking one that exists: a web process reading a mapping of a
    file cut short would die of SIGBUS); returns a descriptor to hand the engine process."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    if os.fstat(fd).st_size < RECORD.size:
        os.ftruncate(fd, RECORD.size)
    return fd


class Pulse:
    """One engine's pulse, mapped: the engine and the supervisor write it, anyone reads it."""

    def __init__(self, fd: int):
        self._map = mmap.mmap(fd, RECORD.size)
        self.inode = os.fstat(fd).st_ino

    @classmethod
    def open(cls, path: str) -> Pulse | None:
        """The pulse at `path`, or None when there is none (an engine without a supervisor's pulse)."""
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            return None
        try:
            if os.fstat(fd).st_size < RECORD.size:
                return None
            return cls(fd)
        finally:
            os.close(fd)   # the mapping keeps the file

    def starting(self, pid: int) -> None:
        RECORD.pack_into(self._map, 0, pid, STARTING, time.monotonic())

    def beat(self) -> None:
        RECORD.pack_into(self._map, 0, os.getpid(), BEATING, time.monotonic())

    def read(self) -> tuple[int, int, float]:
        # Written by another process without a lock: two equal reads in a row are not a torn one.
        while True:
            first = RECORD.unpack_from(self._map, 0)
            if RECORD.unpack_from(self._map, 0) == first:
                return first

    @staticmethod
    def _silence(record: tuple[int, int, float], now: float) -> float:
        _, state, stamp = record
        if state not in (STARTING, BEATING):
            return 0.0   # never stamped: an engine without a supervisor's pulse is taken on trust
        return now - stamp - (START_GRACE_SECONDS if state == STARTING else SILENT_SECONDS)

    def silence(self, now: float | None = None) -> float:
        """Seconds past what this engine is allowed without a beat (<= 0: it is alive, or starting)."""
        return self._silence(self.read(), now if now is not None else time.monotonic())

    def silent(self, now: float | None = None) -> bool:
        now = now if now is not None else time.monotonic()
        # One read on the usual path (it beats): a torn read can only look silent, and is read again.
        return self._silence(RECORD.unpack_from(self._map, 0), now) > 0 and self.silence(now) > 0

    def is_starting(self) -> bool:
        """Started by the supervisor and not beating yet (a replacement loading V8)."""
        return self.read()[1] == STARTING

    def quiet_for(self, now: float | None = None) -> float:
        """Seconds since the last beat (0 while starting, or never stamped); negative when it beat
        after `now`. The clock is read before the pulse, so a reader delayed in between sees less
        silence, never more."""
        now = now if now is not None else time.monotonic()
        _, state, stamp = self.read()
        return now - stamp if state == BEATING else 0.0

    def close(self) -> None:
        self._map.close()


class Pulses:
    """The pulses of a tier's engines as a web process reads them, each mapped once (and again when
    a supervisor started since made the file anew)."""

    def __init__(self) -> None:
        self.opened: dict[str, Pulse | None] = {}
        self._verdicts: dict[tuple[str, ...], tuple[float, tuple[frozenset[str], frozenset[str]]]] = {}

    def of(self, address: str) -> Pulse | None:
        if address not in self.opened:
            self.opened[address] = Pulse.open(pulse_path(address))
        return self.opened[address]

    def silent(self, address: str) -> bool:
        pulse = self.of(address)
        if pulse is None or not pulse.silent():
            return False
        # Rare, so the file is looked at again only now: a new supervisor's file is another one.
        path = pulse_path(address)
        try:
            renewed = os.stat(path).st_ino != pulse.inode
        except OSError:
            renewed = False
        if not renewed:
            return True
        fresh = self.opened[address] = Pulse.open(path)
        return fresh is not None and fresh.silent()

    def unready(self, addresses: list[str], fresh: bool = False) -> tuple[frozenset[str], frozenset[str]]:
        """(silent, starting) among `addresses`: routing passes over the silent ones, and the ones
        being started (a call would wait seconds in their backlog) while another beats. Kept
        VERDICT_SECONDS, as routing asks on every call; `fresh`: looked at now (a call planned again
        because an engine just fell silent)."""
        key, now = tuple(addresses), time.monotonic()
        kept = self._verdicts.get(key)
        if kept is not None and now - kept[0] < VERDICT_SECONDS and not fresh:
            return kept[1]
        silent, starting = [], []
        for address in addresses:
            pulse = self.of(address)
            if pulse is None:
                continue
            if self.silent(address):
                silent.append(address)
            elif pulse.is_starting():
                starting.append(address)
        verdict = (frozenset(silent), frozenset(starting))
        self._verdicts[key] = (now, verdict)
        return verdict

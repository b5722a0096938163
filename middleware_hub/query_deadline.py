"""A client-side deadline on each PostgreSQL round trip, for a server that hangs rather than dies.

A stopped or frozen server (SIGSTOP, a stalled disk, a partitioned proxy) enforces none of its own
timeouts, and its kernel goes on acknowledging every byte, so no TCP timeout fires either: the
statement waits as long as the server hangs, and with it the request and its thread. Here a single
watchdog thread knows when each round trip in progress must have answered by; past that it shuts
the connection's socket down, the blocked read returns at once, psycopg raises, and the caller gets
Django's OperationalError (which the API answers as its JSON 503). The deadline sits above the
server's own statement timeout, so a live server always cancels a slow statement first.

Once a deadline has passed, the database is taken to be hung for a moment (`breaker_seconds`): new
connections and round trips in this process fail at once instead of each waiting out a deadline of
its own, so a freeze costs the requests arriving meanwhile milliseconds, not seconds apiece.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator

from django.db import OperationalError

# The deadline of the round trips made in this context: the execute path sets a short one
# (deadline_for), everything else has the general one.
_seconds: contextvars.ContextVar[float | None] = contextvars.ContextVar("query_deadline_seconds", default=None)

TICK_SECONDS = 0.05   # how often the watchdog looks: a deadline is enforced within this


class DatabaseHung(OperationalError):
    """The database did not answer a round trip in time (or did not, a moment ago)."""


class Watchdog:
    """The round trips in progress (a socket and when it must have answered) and the one thread that
    shuts down the sockets of those past their time."""

    def __init__(self, tick: float = TICK_SECONDS) -> None:
        self._tick = tick
        self._lock = threading.Lock()
        self._tokens = itertools.count()
        self._watched: dict[int, tuple[float, int]] = {}   # token -> (deadline, socket fd)
        self._expired: set[int] = set()
        self._thread: threading.Thread | None = None
        self._work = threading.Event()   # set while round trips are watched: an idle process's thread sleeps
        self.hung_until = 0.0          # monotonic time until which the database is taken to be hung
        self.expiries = 0              # round trips cut off, since start (for /metrics and tests)

    @contextlib.contextmanager
    def watch(self, fd: int, seconds: float, breaker_seconds: float, what: str) -> Iterator[None]:
        """Runs the body (one round trip on socket `fd`) with a deadline of `seconds`; past it the
        socket is shut down and DatabaseHung raised."""
        self.refuse_if_hung(what)
        token = self._start(fd, seconds)
        try:
            yield
        except Exception as exc:
            if self._finish(token):
                self.hung(breaker_seconds)
                raise DatabaseHung(f"the database did not answer within {seconds:g} s ({what}); "
                                   "its connection was closed") from exc
            raise
        else:
            if self._finish(token):   # it answered at the very moment its socket was shut down
                self.hung(breaker_seconds)

    def hung(self, breaker_seconds: float) -> None:
        """The database is taken to be hung for `breaker_seconds` from now."""
        self.hung_until = max(self.hung_until, time.monotonic() + breaker_seconds)

    def refuse_if_hung(self, what: str) -> None:
        left = self.hung_until - time.monotonic()
        if left > 0:
            raise DatabaseHung(f"the database did not answer a moment ago; {what} is not tried for "
                               f"another {left:.1f} s")

    def _start(self, fd: int, seconds: float) -> int:
        token = next(self._tokens)
        with self._lock:
            self._watched[token] = (time.monotonic() + seconds, fd)
            self._work.set()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="query-deadline", daemon=True)
                self._thread.start()
        return token

    def _finish(self, token: int) -> bool:
        """Stops watching; True if its deadline passed (its socket was shut down). Under the lock, so
        a socket is never shut down after its round trip ended (its fd may be someone else's by then)."""
        with self._lock:
            self._watched.pop(token, None)
            if token in self._expired:
                self._expired.discard(token)
                return True
            return False

    def _run(self) -> None:
        while True:
            with self._lock:
                idle = not self._watched
                if idle:
                    self._work.clear()   # a round trip watched from now on sets it again
            if idle:
                self._work.wait()
                continue
            time.sleep(self._tick)
            now = time.monotonic()
            with self._lock:
                for token, (deadline, fd) in list(self._watched.items()):
                    if now >= deadline:
                        del self._watched[token]
                        self._expired.add(token)
                        self.expiries += 1
                        _shut_down(fd)


def _shut_down(fd: int) -> None:
    """Ends the socket under `fd` for every reader (the blocked one returns at once), without closing
    the fd itself: its owner closes it, as it would after any broken connection."""
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


watchdog = Watchdog()


def seconds(default: float) -> float:
    """The deadline of a round trip made now: the context's, or `default`."""
    chosen = _seconds.get()
    return default if chosen is None else chosen


@contextlib.contextmanager
def deadline_for(limit: float) -> Iterator[None]:
    """Round trips made in the body (and the threads it hands its context to) get `limit` seconds."""
    token = _seconds.set(limit)
    try:
        yield
    finally:
        _seconds.reset(token)

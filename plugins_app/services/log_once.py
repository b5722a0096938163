"""Failures that can repeat on every call (a part that is away), logged once per interval per kind, with
how many there were since the last line, instead of a line and a traceback per call (issue 40, item 8)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

LOG_SECONDS = 10.0   # one line per kind of failure per this many seconds
MAX_KINDS = 1000     # kinds remembered; past this the oldest are forgotten (and may log once more)
MORE = " (%d more since the last such line, %.0f s ago)"


@dataclass
class _Kind:
    logged_at: float       # when its last line was written
    held: int = 0          # what was held back since: the sum of those calls' counts
    last: tuple[int, str, tuple[object, ...], int] | None = None   # the last held call: level, message, args, count


class OncePerInterval:
    """One per place that logs a repeating failure. `log(kind, ...)` writes a line when `kind` was not
    logged within `seconds`, saying how many were held back since; otherwise it only counts. The
    first line of a kind carries the traceback (`exc_info`); the ones after it, the count only.
    A call may stand for several (`count`: the tasks one failed write lost), and the count is theirs.
    `flush()` writes what was held back once its interval is over, for a place whose failures may stop:
    without it their count would wait for the next failure of that kind."""

    def __init__(self, logger: logging.Logger, seconds: float = LOG_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.logger, self.seconds, self._clock = logger, seconds, clock
        self._lock = threading.Lock()
        self._kinds: dict[Hashable, _Kind] = {}

    def log(self, kind: Hashable, level: int, message: str, *args: object, exc_info: bool = False,
            count: int = 1) -> bool:
        """Whether a line was written now."""
        now = self._clock()
        with self._lock:
            state = self._kinds.get(kind)
            if state is not None and now - state.logged_at < self.seconds:
                state.held += count
                state.last = (level, message, args, count)
                return False
            if state is None and len(self._kinds) >= MAX_KINDS:
                self._kinds.pop(next(iter(self._kinds)))
            self._kinds[kind] = _Kind(now)
        if state is None:
            self.logger.log(level, message, *args, exc_info=exc_info or None)
        elif state.held:
            self.logger.log(level, message + MORE, *args, state.held, now - state.logged_at)
        else:
            self.logger.log(level, message, *args)
        return True

    def flush(self) -> int:
        """Writes, for each kind whose interval is over with calls held back, the last of those calls
        with how many more there were. How many lines it wrote."""
        now, due = self._clock(), []
        with self._lock:
            for state in self._kinds.values():
                if state.last is not None and now - state.logged_at >= self.seconds:
                    due.append((state.last, state.held - state.last[3], now - state.logged_at))
                    state.logged_at, state.held, state.last = now, 0, None
        for (level, message, args, _), more, ago in due:
            if more:
                self.logger.log(level, message + MORE, *args, more, ago)
            else:
                self.logger.log(level, message, *args)
        return len(due)

    def forget(self, kind: Hashable) -> None:
        """The failure ended (the part is back): its next one is logged at once, with its traceback."""
        with self._lock:
            self._kinds.pop(kind, None)

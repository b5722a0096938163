"""Failures that can repeat on every call (a part that is away), logged once per interval per kind, with
how many there were since the last line, instead of a line and a traceback per call (issue 40, item 8)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable

LOG_SECONDS = 10.0   # one line per kind of failure per this many seconds
MAX_KINDS = 1000     # kinds remembered; past this the oldest are forgotten (and may log once more)


class OncePerInterval:
    """One per place that logs a repeating failure. `log(kind, ...)` writes a line when `kind` was not
    logged within `seconds`, saying how many were held back since; otherwise it only counts. The
    first line of a kind carries the traceback (`exc_info`); the ones after it, the count only."""

    def __init__(self, logger: logging.Logger, seconds: float = LOG_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.logger, self.seconds, self._clock = logger, seconds, clock
        self._lock = threading.Lock()
        self._kinds: dict[Hashable, list[float]] = {}   # kind -> [when last logged, held back since]

    def log(self, kind: Hashable, level: int, message: str, *args: object, exc_info: bool = False) -> bool:
        """Whether a line was written now."""
        now = self._clock()
        with self._lock:
            state = self._kinds.get(kind)
            if state is not None and now - state[0] < self.seconds:
                state[1] += 1
                return False
            if state is None and len(self._kinds) >= MAX_KINDS:
                self._kinds.pop(next(iter(self._kinds)))
            self._kinds[kind] = [now, 0]
        if state is None:
            self.logger.log(level, message, *args, exc_info=exc_info or None)
        elif state[1]:
            self.logger.log(level, message + " (%d more since the last such line, %.0f s ago)", *args,
                            int(state[1]), now - state[0])
        else:
            self.logger.log(level, message, *args)
        return True

    def forget(self, kind: Hashable) -> None:
        """The failure ended (the part is back): its next one is logged at once, with its traceback."""
        with self._lock:
            self._kinds.pop(kind, None)

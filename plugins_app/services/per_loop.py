"""One object per asyncio event loop, made on first use: what a loop's coroutines share (a gate's
futures, an HTTP client's connections) belongs to that loop, and one process may run several loops
(tests; a server runs one). Entries of loops closed since are dropped when a new one is made."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    def __init__(self, make: Callable[[asyncio.AbstractEventLoop], T]):
        self._make = make
        self._values: dict[asyncio.AbstractEventLoop, T] = {}
        self._lock = threading.Lock()

    def get(self) -> T:
        """The running loop's object (only that loop's thread makes it: no race for one loop)."""
        loop = asyncio.get_running_loop()
        value = self._values.get(loop)
        if value is None:
            with self._lock:
                for stale in [other for other in self._values if other.is_closed()]:
                    del self._values[stale]
                value = self._values[loop] = self._make(loop)
        return value

"""What a chain run and a bench need of the engine that runs them (process.py's Engine provides it)."""

from __future__ import annotations

import asyncio
from typing import Protocol

from plugins_app.runtime.engine.isolate import Isolate
from plugins_app.runtime.engine.memory import MemoryBooks
from plugins_app.runtime.protocol import Job, JsonObject, RunResult, RunState


class EngineSide(Protocol):
    """The engine as run.py and bench.py see it: its isolate, its code cache and the chain in progress."""

    state: RunState | None         # the chain in progress: host calls are answered in its context
    run_seq: int                   # the latest chain's number (the harness's progress buffer carries it)
    host_activity: asyncio.Event   # set when a host call is answered: a chain waiting on one looks again
    memory: MemoryBooks            # whose memory the process holds, and the notes their next traces carry

    async def ready_isolate(self) -> Isolate:
        """The isolate chains run in (the spare takes the place of a replaced one)."""
        ...

    async def replace_isolate(self, why: str = ..., culprit: str | None = None) -> None:
        """Close the isolate, stopping whatever runs in it; the spare takes its place."""
        ...

    def remember(self, account: str, code: dict[str, JsonObject]) -> None:
        """Keep code the web process sent (installation id -> {"hash", "code", "config"})."""
        ...

    async def load_missing(self, iso: Isolate, account: str, missing: list[str],
                           hashes: dict[str, str]) -> list[str]:
        """Load what the code cache holds into `iso`; the ids it does not hold are returned."""
        ...

    def lower(self, iso: Isolate) -> None:
        """A handler is burning CPU on `iso`'s thread: give that thread the lowest nice value."""
        ...

    def held_long(self, iso: Isolate) -> None:
        """A handler has held `iso` past HOLD_SECONDS: demote its thread, send its account's calls back."""
        ...

    def restore(self, iso: Isolate) -> bool:
        """Give a demoted isolate thread its priority back; False if the system won't allow it."""
        ...

    async def run(self, job: Job) -> RunResult:
        """Run a RUN request's chain (bench.py runs one this way many times)."""
        ...

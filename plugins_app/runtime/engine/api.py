"""What a chain run and a bench need of the engine that runs them (process.py's Engine provides it)."""

from __future__ import annotations

from typing import Protocol

from plugins_app.runtime.engine.flights import Flights
from plugins_app.runtime.engine.isolate import Isolate
from plugins_app.runtime.engine.memory import MemoryBooks
from plugins_app.runtime.protocol import Job, JsonObject, RunResult


class EngineSide(Protocol):
    """The engine as run.py and bench.py see it: its isolate, its code cache and the chains in flight."""

    run_seq: int                   # the latest chain's number (the harness's progress buffer carries it)
    memory: MemoryBooks            # whose memory the process holds, and the notes their next traces carry
    isolate: Isolate | None        # the isolate chains start on, once there

    async def ready_isolate(self) -> Isolate:
        """The isolate chains start on (the spare takes the place of a replaced one)."""
        ...

    def flights_for(self, iso: Isolate) -> Flights:
        """The chains in flight on `iso`, through which a chain starts and is followed."""
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

    async def run(self, job: Job) -> RunResult:
        """Run a RUN request's chain (bench.py runs one this way many times)."""
        ...

"""The engine's own throughput: one chain run n times inside the engine, without the web process."""

from __future__ import annotations

import time
from typing import Any

from plugins_app.runtime.engine.api import EngineSide
from plugins_app.runtime.protocol import Job, RunResult


async def bench(engine: EngineSide, job: Job) -> RunResult | dict[str, Any]:
    """Run the request's chain `n` times exactly as a request would, answering nothing early."""
    run = Job(job.client, dict(job.message, op="bench-run"), job.started)   # never answered early
    first = await engine.run(run)
    if "missing" in first or "loadError" in first:
        return first
    started, cpu_started = time.perf_counter(), time.process_time()
    result = first
    for _ in range(job.message["n"]):
        result = await engine.run(run)
    # CPU time too: on a shared VM the wall clock also counts time the host gave to others.
    return {"seconds": time.perf_counter() - started, "cpuSeconds": time.process_time() - cpu_started,
            "n": job.message["n"], "sample": result["context"]}

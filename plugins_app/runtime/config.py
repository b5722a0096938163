"""The hook engine's operator settings, typed and checked once where a process starts: Django's
settings, gunicorn.conf.py and the engine supervisor all read them through EngineConfig.from_env,
so each variable has one default (HUB_ENGINE_PROCESSES's is default_processes(), computed here)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from plugins_app.runtime.environment import ConfigError, Env

__all__ = ["ConfigError", "EngineConfig", "default_processes", "machine_cores", "shared_engines_for"]

DEFAULT_LANE_PROCESSES = 1
DEFAULT_ISOLATE_MEMORY_MB = 256
DEFAULT_BUDGET_MS = 5000         # the spec's 5 s per handler
# CPU one invocation may use, wherever it spends it (its body, timers, microtasks): a handler that
# awaits nothing blocking and still runs this long is burning the engine other accounts share.
DEFAULT_CPU_MS = 1000
# What one engine process may hold, its isolates' heaps and the memory they hold outside them
# (ArrayBuffers) together: a 2-core machine's four engines at this fit 24 GiB with room for the rest.
DEFAULT_ENGINE_MEMORY_MB = 2048
# Chains one engine keeps in progress at once, most of them parked at an await (a host call, a
# timer): past it, requests wait in line. Each parked chain costs the engine a few KiB.
DEFAULT_MAX_FLIGHTS = 256


def shared_engines_for(cores: int) -> int:
    """The shared engines a machine with `cores` CPUs runs by default: one per core, and one more.
    An account holds at most one shared engine at a time (engine/board.py), so a chain that sleeps
    or awaits a slow service takes one out of the others' reach until it ends; the extra engine
    keeps one free for everyone else while an account per core is doing that. An idle engine costs
    memory (about 100 MiB), not CPU."""
    return max(1, cores) + 1


def machine_cores() -> int:
    """The CPUs this process may run on (its affinity, as a container or taskset limits it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # no sched_getaffinity outside Linux
        return os.cpu_count() or 1


def default_processes() -> int:
    """HUB_ENGINE_PROCESSES when unset: shared_engines_for this machine. The one place it is worked
    out, whoever starts the engines: gunicorn's tier, a supervisor run apart, or the tier a process
    without one starts itself (runserver, Celery, the tests)."""
    return shared_engines_for(machine_cores())


@dataclass(frozen=True)
class EngineConfig:
    """HUB_ENGINE_DIR is not here: it is where a running tier is, not a choice (gunicorn.conf.py sets
    it for its workers once the tier it starts is up; an operator sets it for a tier run apart)."""

    # HUB_ENGINE_PROCESSES: the machine's shared engines.
    processes: int = field(default_factory=default_processes)
    # HUB_LANE_PROCESSES: engines for suspect and CPU-heavy installations, at a lower CPU priority
    # (0: those run on the shared engines).
    lane_processes: int = DEFAULT_LANE_PROCESSES
    # HUB_ISOLATE_MEMORY_MB: heap limit of each engine's isolate, which every account routed there shares.
    isolate_memory_mb: int = DEFAULT_ISOLATE_MEMORY_MB
    # HUB_BUDGET_MS: wall-clock budget of one handler (tests shorten it to exercise timeouts quickly).
    budget_ms: int = DEFAULT_BUDGET_MS
    # HUB_CPU_MS: thread CPU time one invocation may use, on top of the wall-clock budget.
    cpu_ms: int = DEFAULT_CPU_MS
    # HUB_ENGINE_MEMORY_MB: resident memory of one engine process; near it, the engine finds the
    # installations whose module state holds the memory and drops them (see engine/memory.py).
    engine_memory_mb: int = DEFAULT_ENGINE_MEMORY_MB
    # HUB_ENGINE_MAX_FLIGHTS: chains one engine keeps in progress at once (parked at an await or
    # running); past it, requests wait in line.
    max_flights: int = DEFAULT_MAX_FLIGHTS

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> EngineConfig:
        """The variables' values (an unset or empty one takes its default); ConfigError names
        the first variable whose value is not a whole number in range."""
        env = Env(environ)
        return cls(processes=env.integer("HUB_ENGINE_PROCESSES", default_processes(), minimum=1),
                   lane_processes=env.integer("HUB_LANE_PROCESSES", DEFAULT_LANE_PROCESSES, minimum=0),
                   isolate_memory_mb=env.integer("HUB_ISOLATE_MEMORY_MB", DEFAULT_ISOLATE_MEMORY_MB, minimum=1),
                   budget_ms=env.integer("HUB_BUDGET_MS", DEFAULT_BUDGET_MS, minimum=1),
                   cpu_ms=env.integer("HUB_CPU_MS", DEFAULT_CPU_MS, minimum=1),
                   engine_memory_mb=env.integer("HUB_ENGINE_MEMORY_MB", DEFAULT_ENGINE_MEMORY_MB, minimum=256),
                   max_flights=env.integer("HUB_ENGINE_MAX_FLIGHTS", DEFAULT_MAX_FLIGHTS, minimum=1))

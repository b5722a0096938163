"""Fair admission's settings (HUB_EXECUTE_*), read once at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plugins_app.runtime.environment import Env

# Beside other accounts, a call that found its account's machine place taken rests that place this
# many times as long as it held it, at most MAX_REST_MS: a single closed-loop caller holds its place
# about a third of the time, so 2 gives a tenant calling from many connections about one caller's
# share of calls per second (measured in docs/benchmarks.md; not an operator's choice).
REST_FACTOR = 2.0
MAX_REST_MS = 100.0


@dataclass(frozen=True)
class AdmissionConfig:
    concurrency: int = 0               # calls running Python at once in one web process (0 = no limit)
    per_account: int = 1               # of them, one account's (0 = no limit)
    per_account_scope: str = "machine"  # "machine": an account's places are counted across web processes
    machine_places: int = 0            # the machine's places (0 = one per CPU)
    rest_factor: float = REST_FACTOR
    max_rest_ms: float = MAX_REST_MS

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> AdmissionConfig:
        env = Env(environ)
        return cls(concurrency=env.integer("HUB_EXECUTE_CONCURRENCY", 0),
                   per_account=env.integer("HUB_EXECUTE_CONCURRENCY_PER_ACCOUNT", 1),
                   per_account_scope=env.choice("HUB_EXECUTE_PER_ACCOUNT_SCOPE", "machine", ("machine", "process")),
                   machine_places=env.integer("HUB_EXECUTE_MACHINE_PLACES", 0))

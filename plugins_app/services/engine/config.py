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
# What a shed call's Retry-After says at least: the platform's retry lands after the queue it found
# has drained (every queue is bounded by the deadline), not into it.
MIN_RETRY_AFTER_S = 1


@dataclass(frozen=True)
class AdmissionConfig:
    concurrency: int = 0               # calls running Python at once in one web process (0 = no limit)
    per_account: int = 1               # of them, one account's (0 = no limit)
    per_account_scope: str = "machine"  # "machine": an account's places are counted across web processes
    machine_places: int = 0            # the machine's places (0 = one per CPU)
    rest_factor: float = REST_FACTOR
    max_rest_ms: float = MAX_REST_MS
    queue_deadline_ms: int = 1000      # a call not started within this is answered 503 at once (0 = never)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> AdmissionConfig:
        env = Env(environ)
        return cls(concurrency=env.integer("HUB_EXECUTE_CONCURRENCY", 0),
                   per_account=env.integer("HUB_EXECUTE_CONCURRENCY_PER_ACCOUNT", 1),
                   per_account_scope=env.choice("HUB_EXECUTE_PER_ACCOUNT_SCOPE", "machine", ("machine", "process")),
                   machine_places=env.integer("HUB_EXECUTE_MACHINE_PLACES", 0),
                   queue_deadline_ms=env.integer("HUB_EXECUTE_QUEUE_DEADLINE_MS", 1000))

    @property
    def shed_after(self) -> float:
        """The queue deadline in seconds (0: calls wait for their turn however long it takes)."""
        return self.queue_deadline_ms / 1000

    @property
    def retry_after(self) -> int:
        """What a shed call's Retry-After says: whole seconds, at least the deadline."""
        return max(MIN_RETRY_AFTER_S, -(-self.queue_deadline_ms // 1000))

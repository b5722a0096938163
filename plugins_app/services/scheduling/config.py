"""Scheduled missions', timers' and deliveries' settings (HUB_CRON_*, HUB_NOTIFY_*, HUB_DELIVERY_*)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plugins_app.runtime.environment import Env

# Beat's sweep hands at most this many due timers to the workers per pass.
SWEEP_BATCH = 500
# A timer queued to a worker but not picked up after this long is queued again (a lost message).
REQUEUE_SECONDS = 60
# A timer a worker claimed but never finished after this long is claimed again (a worker that died).
RECLAIM_SECONDS = 3600


@dataclass(frozen=True)
class SchedulingConfig:
    cron_min_interval_seconds: int = 60
    cron_slot_grace_seconds: int = 300      # a slot no worker started within this (or one interval) is dropped
    cron_run_expiry_seconds: int = 24 * 3600  # a run not closed by then stops blocking its job's next slots
    notify_max_delay_seconds: int = 365 * 24 * 3600
    notify_sweep_seconds: int = 2           # how often beat hands due timers out (their precision)
    notify_sweep_batch: int = SWEEP_BATCH
    notify_requeue_seconds: int = REQUEUE_SECONDS
    notify_reclaim_seconds: int = RECLAIM_SECONDS
    delivery_max_retries: int = 8           # platform deliveries retry with backoff 1 s, 2 s, 4 s ...
    delivery_backoff_max_seconds: int = 300
    broker_timeout_seconds: float = 5.0     # a Redis broker's socket and connect timeout (every Celery client)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SchedulingConfig:
        env = Env(environ)
        return cls(
            cron_min_interval_seconds=env.integer("HUB_CRON_MIN_INTERVAL_SECONDS", 60, minimum=1),
            cron_slot_grace_seconds=env.integer("HUB_CRON_SLOT_GRACE_SECONDS", 300, minimum=1),
            cron_run_expiry_seconds=env.integer("HUB_CRON_RUN_EXPIRY_SECONDS", 24 * 3600, minimum=1),
            notify_max_delay_seconds=env.integer("HUB_NOTIFY_MAX_DELAY_SECONDS", 365 * 24 * 3600),
            notify_sweep_seconds=env.integer("HUB_NOTIFY_SWEEP_SECONDS", 2, minimum=1),
            notify_requeue_seconds=env.integer("HUB_NOTIFY_REQUEUE_SECONDS", REQUEUE_SECONDS, minimum=1),
            delivery_max_retries=env.integer("HUB_DELIVERY_MAX_RETRIES", 8),
            delivery_backoff_max_seconds=env.integer("HUB_DELIVERY_BACKOFF_MAX_SECONDS", 300, minimum=1),
            # More than kombu's BRPOP wait (1 s), or an idle worker's every poll would time out.
            broker_timeout_seconds=env.number("HUB_BROKER_TIMEOUT_SECONDS", 5.0, minimum=2.0),
        )

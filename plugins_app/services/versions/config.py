"""Recorded calls' settings (HUB_RECORDED_CALLS_*), read once at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plugins_app.runtime.environment import Env

# How often beat (plugins_app.tasks.prune_recorded_calls) deletes every account's recorded calls past the
# age bound; each write already prunes the hook it wrote to.
PRUNE_EVERY_SECONDS = 600


@dataclass(frozen=True)
class RecordingConfig:
    """Each account keeps at most `per_hook` recent execute calls of each hook, none older than
    `days`; `per_hook` 0 records none (checks then have nothing to run on)."""

    per_hook: int = 1000
    days: int = 7

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> RecordingConfig:
        env = Env(environ)
        return cls(per_hook=env.integer("HUB_RECORDED_CALLS_PER_HOOK", 1000),
                   days=env.integer("HUB_RECORDED_CALLS_DAYS", 7, minimum=1))

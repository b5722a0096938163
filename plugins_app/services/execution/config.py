"""Quarantine's settings (HUB_QUARANTINE_*, HUB_SLOW_LANE_SECONDS), read once at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plugins_app.runtime.environment import Env


@dataclass(frozen=True)
class QuarantineConfig:
    """An installation that times out, wedges or runs out of memory `strikes` times within
    `window_seconds` is skipped for `seconds`; any such misbehaviour also moves it to the slow lane
    for `slow_lane_seconds`."""

    strikes: int = 3
    window_seconds: int = 600
    seconds: int = 600
    slow_lane_seconds: int = 600

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> QuarantineConfig:
        env = Env(environ)
        return cls(strikes=env.integer("HUB_QUARANTINE_STRIKES", 3, minimum=1),
                   window_seconds=env.integer("HUB_QUARANTINE_WINDOW_SECONDS", 600, minimum=1),
                   seconds=env.integer("HUB_QUARANTINE_SECONDS", 600),
                   slow_lane_seconds=env.integer("HUB_SLOW_LANE_SECONDS", 600))

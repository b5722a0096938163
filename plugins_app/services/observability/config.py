"""The metrics scrape's settings (HUB_METRICS_*), read once at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plugins_app.runtime.environment import Env

# How often a process applies its queued metric observations (each is a locked write to a
# memory-mapped file in multiprocess mode, kept off the execute path). Tests set 0: at once.
FLUSH_SECONDS = 1.0


@dataclass(frozen=True)
class MetricsConfig:
    token: str = ""          # GET /metrics wants it as a bearer token; without one, loopback callers only
    max_plugins: int = 200   # distinct plugin labels per process; later plugins count as "other"
    flush_seconds: float = FLUSH_SECONDS

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> MetricsConfig:
        env = Env(environ)
        return cls(token=env.text("HUB_METRICS_TOKEN"), max_plugins=env.integer("HUB_METRICS_MAX_PLUGINS", 200))

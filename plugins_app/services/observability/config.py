"""The metrics scrape's settings (HUB_METRICS_*), read once at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plugins_app.runtime.environment import ConfigError, Env

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


TAIL_CHANNELS = ("auto", "file", "redis")


@dataclass(frozen=True)
class TailConfig:
    """The live tail (GET /api/v1/tail): how a run in one process reaches a stream served by another."""

    channel: str = "file"     # resolved: "file" (a ring of files on this machine) or "redis" (pub/sub)
    redis_url: str = ""       # the pub/sub server when channel is "redis"
    directory: str = ""       # the file ring's folder when channel is "file"
    max_seconds: int = 900    # one stream's longest life; `hub tail` reconnects
    redis_timeout_seconds: float = 0.5   # the tail's Redis client: connect and socket timeout (one try)
    redis_retry_seconds: float = 5.0     # a Redis that did not answer is not asked again for this long

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, broker_url: str, var_dir: str) -> TailConfig:
        env = Env(environ)
        wanted = env.choice("HUB_TAIL_CHANNEL", "auto", TAIL_CHANNELS)
        redis_url = env.text("HUB_TAIL_REDIS_URL") or (broker_url if broker_url.startswith(("redis://", "rediss://"))
                                                       else "")
        if wanted == "redis" and not redis_url:
            raise ConfigError("HUB_TAIL_CHANNEL=redis needs HUB_TAIL_REDIS_URL (or a redis:// CELERY_BROKER_URL)")
        channel = "redis" if wanted == "redis" or (wanted == "auto" and redis_url) else "file"
        return cls(channel=channel, redis_url=redis_url, directory=env.text("HUB_TAIL_DIR") or f"{var_dir}/tail",
                   max_seconds=env.integer("HUB_TAIL_MAX_SECONDS", 900, minimum=1),
                   redis_timeout_seconds=env.number("HUB_TAIL_REDIS_TIMEOUT_SECONDS", 0.5, minimum=0.05),
                   redis_retry_seconds=env.number("HUB_TAIL_REDIS_RETRY_SECONDS", 5.0))

"""host.kv's settings (HUB_KV_MAX_KEYS, HUB_KV_MAX_BYTES, HUB_KV_SWEEP_SECONDS, HUB_KV_DURABLE_WRITES),
read once at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plugins_app.runtime.environment import Env


@dataclass(frozen=True)
class KvConfig:
    # Per account, over all its installations: an account's plugins share one allowance, so one
    # account cannot fill the hub's database whatever number of plugins it installs.
    max_keys: int = 10_000
    max_bytes: int = 50 * 1024 * 1024
    sweep_seconds: int = 300   # how often beat deletes expired keys (reads already skip them)
    # False: on PostgreSQL a plugin's kv write commits without waiting for its WAL to reach the disk
    # (synchronous_commit off for that statement's own transaction only). A database crash can lose
    # the last fraction of a second of kv writes, never corrupt them; docs/plugin-state.md argues it.
    durable_writes: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> KvConfig:
        env = Env(environ)
        return cls(max_keys=env.integer("HUB_KV_MAX_KEYS", 10_000, minimum=1),
                   max_bytes=env.integer("HUB_KV_MAX_BYTES", 50 * 1024 * 1024, minimum=1),
                   sweep_seconds=env.integer("HUB_KV_SWEEP_SECONDS", 300, minimum=1),
                   durable_writes=env.flag("HUB_KV_DURABLE_WRITES", False))

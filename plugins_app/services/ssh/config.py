"""SSH's settings (HUB_SSH_*), read once at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plugins_app.runtime.environment import Env


@dataclass(frozen=True)
class SshConfig:
    key_secret: str = ""     # stored private keys are encrypted with a key derived from this, or SECRET_KEY
    max_output_bytes: int = 1024 * 1024
    connect_timeout_seconds: float = 10.0
    command_timeout_seconds: float = 300.0
    turn_ttl_seconds: int = 24 * 3600

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SshConfig:
        env = Env(environ)
        return cls(key_secret=env.text("HUB_SSH_KEY_SECRET"),
                   max_output_bytes=env.integer("HUB_SSH_MAX_OUTPUT_BYTES", 1024 * 1024, minimum=1),
                   connect_timeout_seconds=env.number("HUB_SSH_CONNECT_TIMEOUT_SECONDS", 10.0),
                   command_timeout_seconds=env.number("HUB_SSH_COMMAND_TIMEOUT_SECONDS", 300.0),
                   turn_ttl_seconds=env.integer("HUB_SSH_TURN_TTL_SECONDS", 24 * 3600, minimum=1))

"""Account secrets' settings (HUB_SECRETS_KEY, HUB_SECRETS_KEY_FALLBACKS), read once at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plugins_app.runtime.environment import Env


@dataclass(frozen=True)
class SecretsConfig:
    # Values are encrypted with a key derived from this (or SECRET_KEY when empty); the fallbacks,
    # SECRET_KEY and SECRET_KEY_FALLBACKS still decrypt, so changing it strands nothing until
    # `manage.py rotate_secrets_key` has re-encrypted every value.
    key: str = ""
    key_fallbacks: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SecretsConfig:
        env = Env(environ)
        return cls(key=env.text("HUB_SECRETS_KEY"), key_fallbacks=env.items("HUB_SECRETS_KEY_FALLBACKS", []))

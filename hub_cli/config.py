"""Where the CLI finds its hub and key: HUB_URL / HUB_KEY, else a profile in the user's config dir."""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PROFILE = "default"


class ConfigError(Exception):
    """No hub URL or key could be found (the message says where it looked; never the key)."""


@dataclass(frozen=True)
class Target:
    url: str
    key: str = ""   # never printed: repr hides it
    source: str = ""   # where the key came from, for messages

    def __repr__(self) -> str:
        return f"Target(url={self.url!r}, key=<hidden>, source={self.source!r})"


def profile_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "hub" / "profiles.ini"


def load(profile: str | None = None, need_key: bool = True) -> Target:
    """HUB_URL and HUB_KEY win over the profile file; `profile` (or HUB_PROFILE) picks its section."""
    name = profile or os.environ.get("HUB_PROFILE") or DEFAULT_PROFILE
    url, key, source = os.environ.get("HUB_URL", ""), os.environ.get("HUB_KEY", ""), "HUB_KEY"
    path = profile_path()
    if (not url or not key) and path.exists():
        parser = configparser.ConfigParser()
        parser.read(path)
        if parser.has_section(name):
            section = parser[name]
            url = url or section.get("url", "")
            if not key and section.get("key"):
                key, source = section.get("key", ""), f"{path} [{name}]"
        elif profile:
            raise ConfigError(f"no profile [{name}] in {path}")
    if not url:
        raise ConfigError(f"no hub URL: set HUB_URL or add url = ... under [{name}] in {path}")
    if need_key and not key:
        raise ConfigError(f"no account key: set HUB_KEY or add key = ... under [{name}] in {path}")
    return Target(url.rstrip("/"), key, source)

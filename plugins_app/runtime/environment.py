"""Typed reads of the hub's environment variables; a bad value stops the start with the variable's name.
Here, without Django, so the engine's config and the Django side's configs read them one way."""

from __future__ import annotations

import math
from collections.abc import Mapping


class ConfigError(ValueError):
    """A variable whose value the hub can't use; the message names it and says what would do."""


class Env:
    """Reads variables from one mapping (os.environ at start, a dict in tests)."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ

    def _raw(self, name: str) -> str | None:
        value = self.environ.get(name)
        return None if value is None or value.strip() == "" else value.strip()

    def text(self, name: str, default: str = "") -> str:
        value = self.environ.get(name)
        return default if value is None else value

    def integer(self, name: str, default: int, *, minimum: int = 0) -> int:
        raw = self._raw(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name} must be a whole number, not {raw!r}") from None
        if value < minimum:
            raise ConfigError(f"{name} must be {minimum} or more, not {value}")
        return value

    def number(self, name: str, default: float, *, minimum: float = 0.0) -> float:
        raw = self._raw(name)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{name} must be a number, not {raw!r}") from None
        if not (math.isfinite(value) and value >= minimum):   # NaN fails too
            raise ConfigError(f"{name} must be a finite number, {minimum:g} or more, not {raw}")
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = self._raw(name)
        if raw is None:
            return default
        if raw.lower() in {"1", "true", "yes", "on"}:
            return True
        if raw.lower() in {"0", "false", "no", "off"}:
            return False
        raise ConfigError(f"{name} must be one of 1/0, true/false, yes/no, on/off, not {raw!r}")

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self._raw(name) or default
        if value not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(map(repr, choices))}, not {value!r}")
        return value

    def items(self, name: str, default: list[str]) -> tuple[str, ...]:
        value = self.environ.get(name)
        if value is None:
            return tuple(default)
        return tuple(item.strip() for item in value.split(",") if item.strip())

"""`hub dev`'s host.kv: a local store with the hub's rules (services/kv/checks.py), kept in memory for the
session and, with --kv FILE, read from that JSON object of key -> value and written back after each run."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import plugins_app.services.kv.checks as checks  # the module alone: hub_cli takes no other part of services/kv
from plugins_app.runtime.web.chain import HostError
from plugins_app.services.kv.checks import KvError


class LocalKv:
    def __init__(self, path: Path | None = None):
        self.path = path
        self.values: dict[str, Any] = {}
        self.expires: dict[str, float] = {}   # epoch seconds; kept for the session only, not in the file
        if path is not None and path.exists():
            seeded = json.loads(path.read_text(encoding="utf-8") or "{}")
            if not isinstance(seeded, dict):
                raise ValueError(f"{path}: expected a JSON object of key -> value")
            for key, value in seeded.items():
                checks.key(key)
                checks.value(value)
            self.values = seeded

    def save(self) -> None:
        if self.path is not None:
            self._expire()
            self.path.write_text(json.dumps(self.values, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    def _expire(self) -> None:
        now = time.time()
        for key in [k for k, at in self.expires.items() if at <= now]:
            self.values.pop(key, None)
            self.expires.pop(key)

    def answer(self, member: str, args: list) -> Any:
        """The answer to host.kv.<member>(*args), or HostError with the hub's message."""
        self._expire()
        try:
            return getattr(self, "_" + member)(args)
        except KvError as exc:
            raise HostError(f"host.kv.{member}: {exc}") from None

    def _get(self, args: list) -> Any:
        return self.values.get(checks.key(_arg(args, 0)))

    def _put(self, args: list) -> None:
        if len(args) < 2:
            raise KvError("give a key and a value")
        options = checks.options(_arg(args, 2), ("ttlSeconds",))
        key, ttl = checks.key(args[0]), checks.ttl(options.get("ttlSeconds"))
        checks.value(args[1])
        self._set(key, args[1], ttl)

    def _set(self, key: str, value: Any, ttl: float | None) -> None:
        self.values[key] = value
        if ttl is None:
            self.expires.pop(key, None)
        else:
            self.expires[key] = time.time() + ttl

    def _delete(self, args: list) -> dict:
        key = checks.key(_arg(args, 0))
        self.expires.pop(key, None)
        return {"deleted": self.values.pop(key, None) is not None}

    def _list(self, args: list) -> dict:
        options = checks.options(_arg(args, 0), ("prefix", "limit", "cursor"))
        prefix = checks.optional_string(options.get("prefix"), "prefix")
        limit = checks.limit(options.get("limit"))
        cursor = checks.optional_string(options.get("cursor"), "cursor")
        keys = sorted(k for k in self.values if k.startswith(prefix) and k > cursor)
        page = keys[:limit]
        return {"keys": [{"key": k, "size": len(k.encode()) + checks.value(self.values[k]).size,
                          "expiresAt": None} for k in page],
                "cursor": page[-1] if len(keys) > limit else None}

    def _incr(self, args: list) -> int | dict:
        options = checks.options(_arg(args, 2), ("ttlSeconds", "max"))
        key = checks.key(_arg(args, 0))
        by = 1 if _arg(args, 1) is None else checks.step(args[1], "by")
        maximum = None if options.get("max") is None else checks.step(options["max"], "max")
        ttl = checks.ttl(options.get("ttlSeconds"))
        current = self.values.get(key)
        if current is not None and not checks.is_integer(current):
            raise KvError("the key holds a value that is not an integer counter")
        start = current or 0
        if maximum is not None and start + by > maximum:
            return {"ok": False, "value": start}
        if current is None:
            self._set(key, start + by, ttl)
        else:
            self.values[key] = start + by
        return start + by


def _arg(args: list, index: int) -> Any:
    return args[index] if len(args) > index else None

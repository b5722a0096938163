"""A run that must write nothing (try, replay, shadow): its host.kv writes land here and are dropped with
the run, while its reads see them over the real store, so the plugin behaves as it would live."""

from __future__ import annotations

import datetime
import time
from typing import Any

from plugins_app.services.kv import store
from plugins_app.services.kv.checks import COUNTER_BYTES, Encoded, KvError, decoded

_GONE = object()   # a key the run deleted


class Overlay:
    def __init__(self) -> None:
        # (installation id, key) -> (value or _GONE, expiry in epoch seconds or None, size)
        self._writes: dict[tuple[int, str], tuple[Any, float | None, int]] = {}

    def _own(self, ns: store.Namespace, key: str) -> tuple[bool, Any]:
        """(whether the run wrote this key, its value then: None when deleted or expired)."""
        written = self._writes.get((ns.installation_id, key))
        if written is None:
            return False, None
        value, expires, _ = written
        return True, None if value is _GONE or (expires is not None and expires <= time.time()) else value

    def get(self, ns: store.Namespace, key: str) -> Any:
        own, value = self._own(ns, key)
        return value if own else store.get(ns, key)

    def put(self, ns: store.Namespace, key: str, encoded: Encoded, ttl: float | None) -> None:
        expires = time.time() + ttl if ttl is not None else None
        self._writes[ns.installation_id, key] = (decoded(encoded.text, encoded.number), expires,
                                                 len(key.encode("utf-8", "surrogatepass")) + encoded.size)

    def delete(self, ns: store.Namespace, key: str) -> bool:
        existed = self.get(ns, key) is not None
        self._writes[ns.installation_id, key] = (_GONE, None, 0)
        return existed

    def incr(self, ns: store.Namespace, key: str, by: int, ttl: float | None, maximum: int | None) -> int | dict:
        own, current = self._own(ns, key)
        if not own:
            current = store.get(ns, key)
        if current is not None and (isinstance(current, bool) or not isinstance(current, int)):
            raise KvError("the key holds a value that is not an integer counter")
        start = current or 0
        if maximum is not None and start + by > maximum:
            return {"ok": False, "value": start}
        written = self._writes.get((ns.installation_id, key))
        expires = written[1] if own and current is not None and written else (
            time.time() + ttl if ttl is not None and current is None else None)
        self._writes[ns.installation_id, key] = (start + by, expires,
                                                 len(key.encode("utf-8", "surrogatepass")) + COUNTER_BYTES)
        return start + by

    def list_keys(self, ns: store.Namespace, prefix: str, limit: int, cursor: str) -> dict:
        """The real listing with the run's writes laid over it (a page may come out shorter than `limit`
        where the run deleted keys; the cursor still moves on)."""
        page = store.list_keys(ns, prefix, limit, cursor)
        last = page["cursor"]
        keys = {k["key"]: k for k in page["keys"]}
        now = time.time()
        for (installation_id, key), (value, expires, size) in self._writes.items():
            if installation_id != ns.installation_id or not key.startswith(prefix) or key <= cursor:
                continue
            if last is not None and key > last:
                continue
            if value is _GONE or (expires is not None and expires <= now):
                keys.pop(key, None)
            else:
                keys[key] = {"key": key, "size": size, "expiresAt": _iso(expires)}
        listed = sorted(keys.values(), key=lambda k: k["key"])
        return {"keys": listed[:limit], "cursor": listed[limit - 1]["key"] if len(listed) > limit else last}


def _iso(expires: float | None) -> str | None:
    if expires is None:
        return None
    return store.iso(datetime.datetime.fromtimestamp(expires, tz=datetime.UTC))

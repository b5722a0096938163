"""An engine's cache of compiled plugin code, by installation: what it loads a compartment from when
its isolate lacks one (a new isolate, a dropped compartment), without asking the web process."""

from __future__ import annotations

from collections import OrderedDict

from plugins_app.runtime.protocol import JsonObject

CODE_CACHE_BYTES = 128 * 1024 * 1024   # code kept per engine; the least recently used goes first


class CodeCache:
    def __init__(self, limit: int = CODE_CACHE_BYTES):
        self.limit = limit
        self._items: OrderedDict[str, JsonObject] = OrderedDict()   # "account/id" -> {"hash", "code", "config"}
        self._bytes = 0

    def remember(self, account: str, code: dict[str, JsonObject]) -> None:
        """Keep code the web process sent (installation id -> {"hash", "code", "config"})."""
        for inst_id, item in code.items():
            key = f"{account}/{inst_id}"
            self.forget(key)
            self._items[key] = item
            self._bytes += len(item["code"])
        while self._bytes > self.limit and len(self._items) > 1:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= len(dropped["code"])

    def get(self, key: str, code_hash: str | None) -> JsonObject | None:
        """The code kept for `key` at that hash (now the most recently used), if any."""
        item = self._items.get(key)
        if item is None or item["hash"] != code_hash:
            return None
        self._items.move_to_end(key)
        return item

    def forget(self, key: str) -> None:
        if (item := self._items.pop(key, None)) is not None:
            self._bytes -= len(item["code"])

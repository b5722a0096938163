"""Per-process cache of each account's chains, keyed by the account's change marker."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass

from django.db import models

from plugins_app.models import ChainEntry, PluginVersion
from plugins_app.runtime.web.chain import Handler
from plugins_app.services.plugins.settings import secret_references
from plugins_app.services.rehearsal import rehearsing

MAX_ACCOUNTS = 4096   # a thousand busy accounts must not evict each other
SHADOW = "shadow:"    # chains[SHADOW + hook]: the handlers that run in shadow after the live chain


def shadow_key(hook: str) -> str:
    return SHADOW + hook


@dataclass
class _Entry:
    version: int
    chains: dict[str, list[Handler]]


class ChainCache:
    """Bounded LRU. A stale entry is noticed by comparing `Account.hooks_version`, which every
    change bumps explicitly (bulk updates skip signals, so nothing relies on them)."""

    def __init__(self, max_accounts: int = MAX_ACCOUNTS):
        self.max_accounts = max_accounts
        self._data: OrderedDict[int, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.loads = 0

    def chains(self, account) -> dict[str, list[Handler]]:
        if rehearsing():   # rows a dry run wrote and will roll back: never cached, never served from the cache
            return load_chains(account.pk)
        with self._lock:
            entry = self._data.get(account.pk)
            if entry is not None and entry.version == account.hooks_version:
                self._data.move_to_end(account.pk)
                return entry.chains
        chains = load_chains(account.pk)
        with self._lock:
            self.loads += 1
            self._data[account.pk] = _Entry(account.hooks_version, chains)
            self._data.move_to_end(account.pk)
            while len(self._data) > self.max_accounts:
                self._data.popitem(last=False)
        return chains

    def handlers(self, account, hook: str) -> list[Handler]:
        return self.chains(account).get(hook, [])

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


def make_handler(installation) -> Handler:
    plugin = installation.plugin
    settings_json = json.dumps(installation.settings or {}, sort_keys=True)
    # The engine keeps a compartment per (installation, hash): new settings need a new one.
    digest = hashlib.sha256(f"{plugin.code_hash}:{settings_json}".encode()).hexdigest()[:24]
    # A setting that names a secret (format secretName) was chosen by an account admin: it grants that secret.
    named = secret_references(plugin.settings_schema or {}, installation.settings or {})
    granted = frozenset([*(installation.granted_permissions or ()), *(f"secret:{name}" for name in named)])
    return Handler(str(installation.pk), plugin.slug, digest, plugin.compiled_js,
                   installation.settings or {}, granted,
                   quarantined_until=_epoch(installation.quarantined_until),
                   slow_lane_until=_epoch(installation.slow_lane_until), version=installation.live_version,
                   matchers=plugin.matchers or {})


def make_version_handler(installation, version) -> Handler:
    """The installation's handler with `version`'s code instead of the live one (replays, shadowed drafts)."""
    settings_json = json.dumps(installation.settings or {}, sort_keys=True)
    digest = hashlib.sha256(f"{version.code_hash}:{settings_json}".encode()).hexdigest()[:24]
    return dataclasses.replace(make_handler(installation), code=version.compiled_js, code_hash=digest,
                               version=version.number, matchers=version.matchers or {})


def _epoch(moment) -> float | None:
    return moment.timestamp() if moment is not None else None


def load_chains(account_id: int) -> dict[str, list[Handler]]:
    # Only what a Handler needs: the whole rows (sources, schemas, JSON fields) cost more to build
    # the query for and to decode than the read itself, on every account's first call.
    entries = list(ChainEntry.objects.filter(account_id=account_id, installation__enabled=True)
                   .select_related("installation__plugin").order_by("hook", "position", "id")
                   .only("hook", "installation__settings", "installation__granted_permissions",
                         "installation__quarantined_until", "installation__slow_lane_until",
                         "installation__live_version", "installation__mode", "installation__shadow_version",
                         "installation__plugin__slug", "installation__plugin__code_hash",
                         "installation__plugin__compiled_js", "installation__plugin__settings_schema",
                         "installation__plugin__matchers"))
    chains: dict[str, list[Handler]] = {}
    handlers: dict[int, Handler] = {}
    drafts = _shadowed_drafts({e.installation_id for e in entries if e.installation.shadow_version is not None})
    for entry in entries:
        inst = entry.installation
        if inst.pk not in handlers:
            handlers[inst.pk] = make_handler(inst)
        live = inst.mode != "shadow"
        chains.setdefault(entry.hook if live else shadow_key(entry.hook), []).append(handlers[inst.pk])
        draft = drafts.get(inst.pk) if live else None
        if draft is not None and entry.hook in draft.hooks:
            chains.setdefault(shadow_key(entry.hook), []).append(make_version_handler(inst, draft))
    return chains


def _shadowed_drafts(installation_ids: set[int]) -> dict:
    """{installation id: the draft version it shadows}; no query when no installation shadows one."""
    if not installation_ids:
        return {}
    return {v.installation_id: v for v in PluginVersion.objects.filter(
        installation_id__in=installation_ids, number=models.F("installation__shadow_version"))}


chain_cache = ChainCache()

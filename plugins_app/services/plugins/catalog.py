"""The official plugin catalog: manifests in plugins_app/catalog/, syncing, installing, settings."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from django.db import IntegrityError, transaction

from plugins_app.errors import CompileFailed, InvalidInput, NotFound
from plugins_app.models import ChainEntry, Installation, Plugin
from plugins_app.services.audit import changes
from plugins_app.services.plugins import chains
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.plugins import settings as plugin_settings
from plugins_app.services.plugins.settings import ManifestError
from plugins_app.services.plugins.version_records import record_upgrade

CATALOG_DIR = Path(__file__).resolve().parents[2] / "catalog"
MANIFEST_KEYS = {"name", "slug", "description", "version", "settings", "include"}
VERSION = re.compile(r"\d+\.\d+\.\d+")
# Fields of an official Plugin row that sync_catalog keeps equal to the catalog.
SYNCED_FIELDS = ("name", "description", "version", "language", "source", "settings_schema",
                 "compiled_js", "code_hash", "hooks", "matchers", "host_members", "permissions")
# What the compiler alone makes: when only these differ (a new compiler, a source map added to its
# output), the plugin is the same one and its installations were not upgraded.
COMPILED_FIELDS = ("compiled_js", "code_hash")

_compiled: dict[str, dict] = {}   # source hash -> compile_source() result, per process


def official_plugins() -> list[dict]:
    """Every manifest in the catalog folder, checked, with `source` (includes first, then
    index.ts), sorted by slug."""
    manifests = []
    for folder in sorted(p for p in CATALOG_DIR.iterdir() if p.is_dir() and not p.name.startswith("_")):
        manifests.append(_read_manifest(folder))
    return manifests


def _read_manifest(folder: Path) -> dict:
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{folder.name}: unreadable manifest.json: {exc}") from None
    if not isinstance(manifest, dict):
        raise ManifestError(f"{folder.name}: manifest.json must hold an object")
    unknown = set(manifest) - MANIFEST_KEYS
    if unknown:
        raise ManifestError(f"{folder.name}: unknown manifest keys {sorted(unknown)}")
    if manifest.get("slug") != folder.name:
        raise ManifestError(f"{folder.name}: the slug must equal the folder name")
    for key in ("name", "description"):
        if not isinstance(manifest.get(key), str) or not manifest[key].strip():
            raise ManifestError(f"{folder.name}: {key} must be a non-empty string")
    if not isinstance(manifest.get("version"), str) or not VERSION.fullmatch(manifest["version"]):
        raise ManifestError(f"{folder.name}: version must look like 1.2.3")
    manifest.setdefault("settings", {})
    plugin_settings.check_schema(folder.name, manifest["settings"])
    parts = []
    for include in manifest.pop("include", []):
        path = (CATALOG_DIR / include).resolve()
        if CATALOG_DIR.resolve() not in path.parents or not path.is_file():
            raise ManifestError(f"{folder.name}: include {include!r} is not a file in the catalog")
        parts.append(path.read_text(encoding="utf-8"))
    parts.append((folder / "index.ts").read_text(encoding="utf-8"))
    manifest["source"] = "\n".join(parts)
    return manifest


def _compile(source: str) -> dict:
    key = hashlib.sha256(source.encode()).hexdigest()
    if key not in _compiled:
        _compiled[key] = plugins.compile_source(source, "typescript")
    return _compiled[key]


@dataclass
class SyncResult:
    slug: str
    version: str
    action: str                    # created | upgraded | recompiled | unchanged
    previous_version: str | None = None
    installations: int = 0
    settings_refreshed: int = 0
    accounts: set = field(default_factory=set)

    def __str__(self) -> str:
        text = f"{self.slug} {self.version}: {self.action}"
        if self.action == "upgraded":
            text += f" from {self.previous_version} ({self.installations} installations kept)"
        if self.settings_refreshed:
            text += f"; settings refreshed for {self.settings_refreshed} installations"
        return text


def sync_catalog() -> list[SyncResult]:
    """Create or upgrade the official Plugin rows from the catalog folder. An upgrade updates
    the row in place, so installations, grants and chain positions stay."""
    return [_sync_one(manifest) for manifest in official_plugins()]


def _sync_one(manifest: dict) -> SyncResult:
    slug = manifest["slug"]
    try:
        compiled = _compile(manifest["source"])   # outside the transaction: it can take a while
    except CompileFailed as exc:
        raise ManifestError(f"{slug}: {exc.detail}") from None
    wanted = {"name": manifest["name"], "description": manifest["description"],
              "version": manifest["version"], "language": Plugin.Language.TYPESCRIPT,
              "source": manifest["source"], "settings_schema": manifest["settings"], **compiled}
    try:
        with transaction.atomic():
            # No key lock: installing it meanwhile (a row that refers to it) need not wait for the sync.
            plugin = Plugin.objects.select_for_update(no_key=True).filter(account=None, slug=slug).first()
            if plugin is None:
                Plugin.objects.create(account=None, slug=slug, **wanted)
                return SyncResult(slug, manifest["version"], "created")
            # Every account it is installed in, in one order, before any write: a sync and admins'
            # writes to those accounts queue one after the other, never each holding what the other wants.
            for account_id in sorted(set(plugin.installations.values_list("account_id", flat=True))):
                chains.lock_account(account_id)
            result = SyncResult(slug, manifest["version"], "unchanged")
            differing = [name for name in SYNCED_FIELDS if getattr(plugin, name) != wanted[name]]
            if differing and set(differing) <= set(COMPILED_FIELDS):
                result.action = "recompiled"
                _recompile(plugin, wanted, result)
            elif differing:
                result.action, result.previous_version = "upgraded", plugin.version
                _upgrade(plugin, wanted, result)
            _refresh_settings(plugin, result)
            for account_id in result.accounts:
                chains.mark_changed(account_id)
            return result
    except IntegrityError:
        # Another process created it between our read and our insert: it is synced now.
        return SyncResult(slug, manifest["version"], "unchanged")


def _recompile(plugin: Plugin, wanted: dict, result: SyncResult) -> None:
    """Same source and version, new compiled code: engines must load it (the hash changed), but no
    installation's change log says it was upgraded."""
    for name in COMPILED_FIELDS:
        setattr(plugin, name, wanted[name])
    plugin.save(update_fields=[*COMPILED_FIELDS, "updated_at"])
    result.accounts.update(plugin.installations.values_list("account_id", flat=True))


def _upgrade(plugin: Plugin, wanted: dict, result: SyncResult) -> None:
    old_hooks, previous_version = list(plugin.hooks), plugin.version
    for name in SYNCED_FIELDS:
        setattr(plugin, name, wanted[name])
    plugin.save()
    added = [hook for hook in plugin.hooks if hook not in old_hooks]
    removed = [hook for hook in old_hooks if hook not in plugin.hooks]
    installations = list(plugin.installations.order_by("account_id", "pk"))
    ChainEntry.objects.filter(installation__plugin=plugin, hook__in=removed).delete()
    for account_id in sorted({i.account_id for i in installations}):
        chains.compact(account_id, removed)
    for installation in installations:
        chains.append_to_chains(installation, added)
        kept = [p for p in installation.granted_permissions if p in plugin.permissions]
        if kept != installation.granted_permissions:
            installation.granted_permissions = kept
            installation.save(update_fields=["granted_permissions", "updated_at"])
        record_upgrade(installation, previous_version)
        result.installations += 1
        result.accounts.add(installation.account_id)


def _refresh_settings(plugin: Plugin, result: SyncResult) -> None:
    """Bring every installation's settings up to the schema: new defaults, dropped keys,
    recomputed values (a time zone's offsets move on every year)."""
    for installation in plugin.installations.all():
        try:
            fresh = plugin_settings.merge(plugin.slug, plugin.settings_schema, installation.settings, {})
        except InvalidInput:
            continue   # a newly required setting without a default: the admin must set it
        if fresh != installation.settings:
            installation.settings = fresh
            installation.save(update_fields=["settings", "updated_at"])
            result.settings_refreshed += 1
            result.accounts.add(installation.account_id)


def official_plugin(slug) -> Plugin:
    if not isinstance(slug, str) or not slug:
        raise InvalidInput("catalog", "expected the slug of an official plugin")
    plugin = Plugin.objects.filter(account=None, slug=slug).first()
    if plugin is None:
        known = ", ".join(Plugin.objects.filter(account=None).order_by("slug").values_list("slug", flat=True))
        raise NotFound(f"no official plugin {slug!r} (the catalog has: {known or 'nothing yet'})")
    return plugin


def catalog(account) -> tuple[list[Plugin], dict[int, int]]:
    """The official plugins, and which of them this account has installed (plugin id ->
    installation id)."""
    installed = dict(Installation.objects.filter(account=account, plugin__account=None)
                     .values_list("plugin_id", "pk"))
    return list(Plugin.objects.filter(account=None).order_by("name")), installed


def install_official(account, slug, settings=None, grant=None) -> Installation:
    """Install an official plugin with settings validated against its manifest."""
    plugin = official_plugin(slug)
    patch = plugin_settings.clean_patch(plugin.slug, plugin.settings_schema, settings)
    clean = plugin_settings.merge(plugin.slug, plugin.settings_schema, {}, patch)
    return plugins.install_existing(account, plugin, grant=grant, settings=clean)


def update_settings(account, installation_id, settings) -> Installation:
    """Change some of an installation's settings (`null` resets one to its default)."""
    installation = plugins.get_installation(account, installation_id)
    plugin = installation.plugin
    if not isinstance(settings, dict):
        raise InvalidInput("settings", "expected an object of setting name to value")
    patch = plugin_settings.clean_patch(plugin.slug, plugin.settings_schema, settings)
    with transaction.atomic():
        chains.lock_account(account.pk)
        installation = Installation.objects.select_for_update().select_related("plugin").get(pk=installation.pk)
        before = installation.settings
        installation.settings = plugin_settings.merge(plugin.slug, plugin.settings_schema,
                                                      installation.settings, patch)
        installation.save(update_fields=["settings", "updated_at"])
        if before != installation.settings:
            changes.record(account.pk, changes.ACTIONS.SETTINGS, f"changed the settings of {plugin.slug}",
                           installation=installation, before={"settings": before},
                           after={"settings": installation.settings})
        chains.mark_changed(account.pk)
    return installation

"""An account's installations and chain orders as plain data, for `hub export`: no secret value leaves."""

from __future__ import annotations

from plugins_app.models import ChainEntry, Installation
from plugins_app.runtime.tables.hooks import HOOK_NAMES
from plugins_app.services.plugins import settings as plugin_settings


def exportable_settings(schema: dict, values: dict | None) -> dict:
    """An installation's settings without computed keys (the hub derives them again) and without any
    key its schema marks secret; a `{{secret.X}}` placeholder is plain text and stays as written."""
    computed = plugin_settings.computed_keys(schema)
    secret = {key for key, spec in schema.items() if isinstance(spec, dict) and spec.get("secret")}
    return {key: value for key, value in sorted((values or {}).items()) if key not in computed | secret}


def _installation(installation: Installation) -> dict:
    plugin = installation.plugin
    item = {
        "installationId": str(installation.pk), "plugin": plugin.slug, "name": plugin.name,
        "description": plugin.description, "official": plugin.is_official, "language": plugin.language,
        "liveVersion": installation.live_version, "enabled": installation.enabled, "mode": installation.mode,
        "hooks": list(plugin.hooks), "permissions": sorted(plugin.permissions),
        "granted": sorted(installation.granted_permissions or ()),
        "settings": exportable_settings(plugin.settings_schema or {}, installation.settings),
    }
    if plugin.is_official:
        item["catalogVersion"] = plugin.version
    else:   # an official plugin's code is the catalog's; the account's own is the account's
        item["source"] = plugin.source
    return item


def account_state(account) -> dict:
    """{"plugins": [...by slug], "chains": {hook: [slug, ...]}}, in a stable order."""
    installations = (Installation.objects.filter(account=account).select_related("plugin")
                     .order_by("plugin__slug", "id"))
    entries = (ChainEntry.objects.filter(account=account).select_related("installation__plugin")
               .order_by("position", "id"))
    chains: dict[str, list[str]] = {}
    for entry in entries:
        chains.setdefault(entry.hook, []).append(entry.installation.plugin.slug)
    return {"plugins": [_installation(i) for i in installations],
            "chains": {hook: chains[hook] for hook in HOOK_NAMES if hook in chains}}

"""Changes the admin makes that the plugin services don't cover: drag-and-drop positions, settings."""

from __future__ import annotations

from django.db import transaction

from accounts.models import Account
from accounts.services import lock_account
from plugins_app.errors import InvalidInput
from plugins_app.models import ChainEntry, Installation
from plugins_app.services.hooks import require_hook
from plugins_app.services.plugins import catalog, chains
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.plugins import settings as plugin_settings


@transaction.atomic
def apply_positions(account: Account, hook: str, positions: dict[int, int]) -> list[ChainEntry]:
    """Apply {chain entry id: position} from a drag and drop to one hook's chain, then renumber
    0..n-1 and mark the account changed, so the very next execute runs the new order.

    Entries not mentioned keep their position; ties go to the entries that were moved, then to the
    lower id, so even positions computed from a stale page give one total order."""
    require_hook(hook)
    # Lock before reading, so two concurrent drags are applied one after the other.
    lock_account(account.pk)
    entries = chains.chain_entries(account, hook)
    known = {e.pk for e in entries}
    for pk, position in positions.items():
        if pk not in known:
            raise InvalidInput("updatedItems", f"entry {pk} is not in the {hook} chain of {account}")
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise InvalidInput("updatedItems", "positions are integers >= 0")
    ordered = sorted(entries, key=lambda e: (positions.get(e.pk, e.position), e.pk not in positions, e.pk))
    return chains.set_order(account, hook, [str(e.installation_id) for e in ordered])


def editable_settings(installation: Installation) -> dict:
    """The settings an admin edits: computed keys (a time zone's offset table) are the hub's."""
    computed = plugin_settings.computed_keys(installation.plugin.settings_schema)
    return {k: v for k, v in (installation.settings or {}).items() if k not in computed}


def settings_patch(installation: Installation, settings) -> dict:
    """A whole edited settings object as a catalog patch: a key left out goes back to its default."""
    if not isinstance(settings, dict):
        raise InvalidInput("settings", "expected a JSON object")
    return {**{key: None for key in editable_settings(installation) if key not in settings}, **settings}


def check_settings(installation: Installation, settings) -> dict:
    """The settings an installation would have after the edit; InvalidInput names a bad one."""
    plugin = installation.plugin
    patch = plugin_settings.clean_patch(plugin.slug, plugin.settings_schema, settings_patch(installation, settings))
    return plugin_settings.merge(plugin.slug, plugin.settings_schema, installation.settings, patch)


@transaction.atomic
def update_installation(account: Account, installation_id, *, enabled: bool | None = None,
                        grant: list[str] | None = None, settings: dict | None = None) -> Installation:
    """Change what an installation may do and how; its places in the chains stay as they are."""
    installation = plugins.get_installation(account, installation_id)
    if settings is not None and settings != editable_settings(installation):
        installation = catalog.update_settings(account, installation_id, settings_patch(installation, settings))
    if enabled is not None and enabled != installation.enabled:
        installation = plugins.set_enabled(account, installation_id, enabled)
    if grant is not None and sorted(grant) != sorted(installation.granted_permissions):
        installation = plugins.grant(account, installation_id, grant)
    return installation

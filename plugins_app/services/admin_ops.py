"""Changes the admin makes that the plugin services don't cover: drag-and-drop positions, settings."""

from __future__ import annotations

from django.db import transaction

from accounts.models import Account
from plugins_app.errors import InvalidInput
from plugins_app.models import ChainEntry, Installation

from . import chains, plugins


@transaction.atomic
def apply_positions(account: Account, hook: str, positions: dict[int, int]) -> list[ChainEntry]:
    """Apply {chain entry id: position} from a drag and drop to one hook's chain, then renumber
    0..n-1 and mark the account changed, so the very next execute runs the new order.

    Entries not mentioned keep their position; ties go to the entries that were moved, then to the
    lower id, so even positions computed from a stale page give one total order."""
    chains.require_hook(hook)
    # Lock before reading, so two concurrent drags are applied one after the other.
    list(Account.objects.select_for_update().filter(pk=account.pk).values_list("pk", flat=True))
    entries = chains.chain_entries(account, hook)
    known = {e.pk for e in entries}
    for pk, position in positions.items():
        if pk not in known:
            raise InvalidInput("updatedItems", f"entry {pk} is not in the {hook} chain of {account}")
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise InvalidInput("updatedItems", "positions are integers >= 0")
    ordered = sorted(entries, key=lambda e: (positions.get(e.pk, e.position), e.pk not in positions, e.pk))
    return chains.set_order(account, hook, [str(e.installation_id) for e in ordered])


@transaction.atomic
def update_installation(account: Account, installation_id, *, enabled: bool | None = None,
                        grant: list[str] | None = None, settings: dict | None = None) -> Installation:
    """Change what an installation may do and how; its places in the chains stay as they are."""
    if settings is not None and not isinstance(settings, dict):
        raise InvalidInput("settings", "expected a JSON object")
    installation = plugins.get_installation(account, installation_id)
    if enabled is not None and enabled != installation.enabled:
        installation = plugins.set_enabled(account, installation_id, enabled)
    if grant is not None and sorted(grant) != sorted(installation.granted_permissions):
        installation = plugins.grant(account, installation_id, grant)
    if settings is not None and settings != installation.settings:
        installation.settings = settings
        installation.save(update_fields=["settings", "updated_at"])
        chains.mark_changed(account.pk)
    return installation

"""Chain order per hook: reading, reordering, inserting, and the account's change marker."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F, Max

from accounts.models import Account
from accounts.services import lock_account
from plugins_app.errors import InvalidInput
from plugins_app.models import ChainEntry, Installation
from plugins_app.services.audit import changes
from plugins_app.services.hooks import require_hook
from plugins_app.services.ids import get_in_account


def mark_changed(account_id: int) -> None:
    """Bump the change marker that tells every process its cached chains are stale."""
    Account.objects.filter(pk=account_id).update(hooks_version=F("hooks_version") + 1)


def chain_entries(account, hook: str):
    require_hook(hook)
    return list(ChainEntry.objects.filter(account=account, hook=hook)
                .select_related("installation__plugin").order_by("position", "id"))


def _record_reorder(account, hook: str, before: list[ChainEntry], after: list[ChainEntry]) -> None:
    names = [[e.installation.plugin.slug for e in entries] for entries in (before, after)]
    if names[0] != names[1]:
        changes.record(account.pk, changes.ACTIONS.REORDER, f"reordered the {hook} chain",
                       before={"hook": hook, "order": names[0]}, after={"hook": hook, "order": names[1]})


def _renumber(entries: list[ChainEntry]) -> None:
    """Positions 0..n-1 in the order of `entries`, one whole chain, under the account's lock. The
    chain's positions are unique (a constraint), checked row by row: the entries that move go first
    past the chain's end, then to their places, so no two rows ever share a position on the way."""
    moving = [(position, entry) for position, entry in enumerate(entries) if entry.position != position]
    if not moving:
        return
    past_end = 1 + max(entry.position for entry in entries)
    for offset, (_, entry) in enumerate(moving):
        entry.position = past_end + offset
    ChainEntry.objects.bulk_update([entry for _, entry in moving], ["position"])
    for position, entry in moving:
        entry.position = position
    ChainEntry.objects.bulk_update([entry for _, entry in moving], ["position"])


def compact(account_id: int, hooks) -> None:
    """Close the gaps entries removed from these chains left: positions 0..n-1 again, in order.
    The caller holds the account's lock."""
    for hook in hooks:
        _renumber(list(ChainEntry.objects.filter(account_id=account_id, hook=hook).order_by("position", "id")))


def append_to_chains(installation: Installation, hooks) -> None:
    """Put a new installation at the end of each chain it hooks. The caller holds the account's lock
    (lock_account), so the chain's end read here is still its end when the entry is written."""
    for hook in hooks:
        last = (ChainEntry.objects.filter(account_id=installation.account_id, hook=hook)
                .aggregate(m=Max("position"))["m"])
        ChainEntry.objects.create(account_id=installation.account_id, hook=hook,
                                  installation=installation, position=0 if last is None else last + 1)


@transaction.atomic
def set_order(account, hook: str, order: list[str]) -> list[ChainEntry]:
    """Replace a hook's order; `order` must name exactly the installations in that chain."""
    require_hook(hook)
    lock_account(account.pk)
    entries = chain_entries(account, hook)
    by_id = {str(e.installation_id): e for e in entries}
    if not isinstance(order, list) or not all(isinstance(i, str) for i in order):
        raise InvalidInput("order", "expected an array of installation ids (strings)")
    if len(set(order)) != len(order):
        raise InvalidInput("order", "an installation appears twice")
    unknown = [i for i in order if i not in by_id]
    if unknown:
        raise InvalidInput("order", f"installation {unknown[0]} is not in the {hook} chain")
    missing = [i for i in by_id if i not in order]
    if missing:
        raise InvalidInput("order", f"installation {missing[0]} is missing; list every installation in the chain")
    reordered = [by_id[i] for i in order]
    _renumber(reordered)
    _record_reorder(account, hook, entries, reordered)
    mark_changed(account.pk)
    return reordered


@transaction.atomic
def move_to(account, hook: str, installation_id: str, position: int) -> list[ChainEntry]:
    """Insert (or move) one installation at `position` in a hook's chain."""
    spec = require_hook(hook)
    lock_account(account.pk)
    installation = get_in_account(Installation.objects.select_related("plugin"), account, installation_id,
                                  "installationId", f"installation {installation_id} not found")
    if spec.name not in installation.plugin.hooks:
        raise InvalidInput("installationId", f"{installation.plugin.slug} does not define a {hook} handler")
    if not isinstance(position, int) or isinstance(position, bool) or position < 0:
        raise InvalidInput("position", "expected an integer >= 0")
    current = chain_entries(account, hook)
    entries = [e for e in current if e.installation_id != installation.pk]
    entry = (ChainEntry.objects.filter(installation=installation, hook=hook).first()
             or ChainEntry.objects.create(account=account, hook=hook, installation=installation,
                                          position=len(current)))   # at the end, then moved
    entries.insert(min(position, len(entries)), entry)
    _renumber(entries)
    _record_reorder(account, hook, current, entries)
    mark_changed(account.pk)
    return entries

"""What people see of an installation's store (the admin and the API): its live keys with their values,
sizes and expiry, a secret's value never shown, and deleting a key or every key (in the change log)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from plugins_app.errors import InvalidInput, NotFound
from plugins_app.models import AccountChange, Installation, KvEntry, Secret
from plugins_app.services.audit import changes
from plugins_app.services.kv import checks, store
from plugins_app.services.kv.checks import KvError
from plugins_app.services.plugins.installations import get_installation
from plugins_app.services.secrets.redaction import Redactor


def namespace(installation: Installation) -> store.Namespace:
    return store.Namespace(installation.account_id, installation.pk)


def live_entries(installation: Installation, prefix: str = "") -> QuerySet[KvEntry]:
    """The installation's keys that have not expired, in key order, `prefix` narrowing them."""
    rows = KvEntry.objects.filter(store._live(timezone.now()), installation=installation).order_by("key")
    if prefix:
        rows = rows.filter(key__startswith=_checked_prefix(prefix))
    return rows


def _checked_prefix(prefix: Any) -> str:
    try:
        return checks.optional_string(prefix, "prefix")
    except KvError as exc:
        raise InvalidInput("prefix", str(exc).removeprefix("prefix ")) from None


def entries_of(account, installation_id, prefix: str = "") -> tuple[Installation, QuerySet[KvEntry]]:
    """The API's list: another account's installation id answers 404 like a missing one."""
    installation = get_installation(account, installation_id)
    return installation, live_entries(installation, prefix)


def account_redactor(account_id: int) -> Redactor:
    """Knows every secret value of the account: a plugin that stored one (fetched back, or pasted into its
    settings) does not show it to whoever reads the store."""
    redactor = Redactor()
    for secret in Secret.objects.filter(account_id=account_id):
        redactor.add(secret.name, secret.value())
    return redactor


def shown(entry: KvEntry, redactor: Redactor) -> dict:
    return {"key": redactor.text(entry.key), "value": redactor.data(checks.decoded(entry.value, entry.number)),
            "size": entry.size, "expiresAt": store.iso(entry.expires_at), "updatedAt": store.iso(entry.updated_at)}


def delete_key(account, installation_id, key: Any) -> None:
    installation = get_installation(account, installation_id)
    try:
        key = checks.key(key)
    except KvError as exc:
        raise InvalidInput("key", str(exc).removeprefix("the key ")) from None
    # One transaction with its change-log row: both or neither, and durable (a kv write inside a
    # transaction is never relaxed, store.relaxed()).
    with transaction.atomic():
        if not store.delete(namespace(installation), key):
            raise NotFound(f"installation {installation.pk} has no kv key {key!r}")
        changes.record(account.pk, AccountChange.Action.KV_DELETE,
                       f"deleted the kv key {account_redactor(account.pk).text(key)!r} of {installation.plugin.slug}",
                       installation=installation)


def clear(account, installation_id) -> int:
    installation = get_installation(account, installation_id)
    with transaction.atomic():   # with its change-log row, as delete_key
        deleted = store.clear(namespace(installation))
        changes.record(account.pk, AccountChange.Action.KV_CLEAR,
                       f"cleared the kv store of {installation.plugin.slug} ({deleted} keys)",
                       installation=installation, after={"deleted": deleted})
    return deleted

"""Setting, listing and deleting an account's secrets; each change goes in the change log without its value."""

from __future__ import annotations

import re

from django.db import transaction
from django.db.models import QuerySet

from accounts.models import Account
from plugins_app.errors import InvalidInput, NotFound, PayloadTooLarge
from plugins_app.models import AccountChange, Installation, Secret
from plugins_app.models.secrets import MAX_VALUE_BYTES, NAME_PATTERN
from plugins_app.services.audit import changes
from plugins_app.services.secrets.hosts import normalize_hosts

NAME = re.compile(NAME_PATTERN)
# A value is redacted wherever it appears: a very short one would blank out unrelated text.
MIN_VALUE_CHARS = 8
MAX_DESCRIPTION = 500


def check_name(name) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInput("name", f"{str(name)[:80]!r} is not a secret name: an upper-case letter, then up to 63 "
                                   "upper-case letters, digits or _ (e.g. SLACK_TOKEN)")
    return name


def check_value(value) -> str:
    if not isinstance(value, str):
        raise InvalidInput("value", "expected a string")
    size = len(value.encode())
    if size > MAX_VALUE_BYTES:
        raise PayloadTooLarge(f"value: {size} bytes is over the {MAX_VALUE_BYTES} byte (8 KiB) limit", field="value")
    if len(value) < MIN_VALUE_CHARS:
        raise InvalidInput("value", f"at least {MIN_VALUE_CHARS} characters: a value is redacted wherever it "
                                    "appears, and a shorter one would blank out unrelated text")
    if "\0" in value:
        raise InvalidInput("value", "contains a NUL character")
    return value


def check_hosts(hosts, places: list[str] | None = None) -> list[str]:
    try:
        return normalize_hosts(hosts, places)
    except ValueError as exc:
        raise InvalidInput("allowedHosts", str(exc)) from None


def check_description(description) -> str:
    if description is None:
        return ""
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise InvalidInput("description", f"expected a string of at most {MAX_DESCRIPTION} characters")
    return description


def list_secrets(account: Account) -> QuerySet[Secret]:
    return Secret.objects.filter(account=account).order_by("name")


def get_secret(account, name) -> Secret:
    secret = Secret.objects.filter(account=account, name=name).first() if isinstance(name, str) else None
    if secret is None:
        raise NotFound(f"no secret named {str(name)[:80]!r} in this account")
    return secret


def _shown(secret: Secret) -> dict:
    """What the change log keeps of a secret: never its value."""
    return {"allowedHosts": list(secret.allowed_hosts), "description": secret.description}


def set_secret(account, name, *, value=None, allowed_hosts=None, description=None) -> tuple[Secret, bool]:
    """Create the secret or change it; an omitted value or allowedHosts keeps the stored one.
    Everything is checked before anything changes. Returns the secret and whether it is new."""
    check_name(name)
    value = None if value is None else check_value(value)
    hosts = None if allowed_hosts is None else check_hosts(allowed_hosts)
    description = None if description is None else check_description(description)
    with transaction.atomic():
        found = Secret.objects.select_for_update().filter(account=account, name=name).first()
        created = found is None
        if found is None:
            if value is None:
                raise InvalidInput("value", "required for a new secret")
            if hosts is None:
                raise InvalidInput("allowedHosts", "required for a new secret")
        secret = found or Secret(account=account, name=name)
        before = None if created else _shown(secret)
        _apply(secret, value, hosts, description)
        secret.save()
        _record(account, secret, created, value is not None, before)
    return secret, created


def _apply(secret: Secret, value: str | None, hosts: list[str] | None, description: str | None) -> None:
    if value is not None:
        secret.set_value(value)
        secret.set_by = changes.current_actor().name
    if hosts is not None:
        secret.allowed_hosts = hosts
    if description is not None:
        secret.description = description


def _record(account, secret: Secret, created: bool, new_value: bool, before: dict | None) -> None:
    actions = AccountChange.Action
    if created:
        action, summary = actions.SECRET_SET, f"set secret {secret.name}"
    elif new_value:
        action, summary = actions.SECRET_ROTATE, f"replaced the value of secret {secret.name}"
    else:
        action, summary = actions.SECRET_UPDATE, f"changed secret {secret.name}"
    after = _shown(secret)
    if not created and not new_value and before == after:
        return   # nothing changed: nothing to log
    changes.record(account.pk, action, summary, before=before, after=after)


@transaction.atomic
def delete_secret(account, name) -> None:
    secret = get_secret(account, name)
    changes.record(account.pk, AccountChange.Action.SECRET_DELETE, f"deleted secret {secret.name}",
                   before=_shown(secret))
    secret.delete()


def granted_to(secret: Secret) -> list[Installation]:
    """The account's installations granted this secret (secret:NAME), by plugin name."""
    permission = f"secret:{secret.name}"
    installations = Installation.objects.filter(account_id=secret.account_id).select_related("plugin")
    return sorted((i for i in installations if permission in (i.granted_permissions or ())),
                  key=lambda i: i.plugin.name)


def secrets_named(account_id: int, names) -> dict[str, Secret]:
    """The account's secrets among `names`, by name."""
    names = sorted(set(names))
    if not names:
        return {}
    return {s.name: s for s in Secret.objects.filter(account_id=account_id, name__in=names)}


def rotate_all() -> int:
    """Re-encrypt every stored value with the current primary key; returns how many."""
    count = 0
    with transaction.atomic():
        for secret in Secret.objects.select_for_update().only("pk", "name", "account_id", "value_encrypted"):
            secret.reencrypt()
            Secret.objects.filter(pk=secret.pk).update(value_encrypted=secret.value_encrypted)
            count += 1
    return count

"""Account, API key and membership operations shared by commands, the admin and demo loaders."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.db import models, transaction

from .models import Account, ApiKey, Membership

if TYPE_CHECKING:
    from django.contrib.auth.models import User

_NAME_MAX_LENGTH = Account._meta.get_field("name").max_length
assert _NAME_MAX_LENGTH is not None  # a CharField always has one; Django types it Optional
ACCOUNT_NAME_MAX_LENGTH: int = _NAME_MAX_LENGTH


def get_or_create_account(name: str | None) -> Account:
    """The account called `name` (surrounding whitespace ignored), created if missing."""
    name = (name or "").strip()
    if not name:
        raise ValueError("account name must not be empty")
    if len(name) > ACCOUNT_NAME_MAX_LENGTH:
        raise ValueError(f"account name must be at most {ACCOUNT_NAME_MAX_LENGTH} characters")
    account, _ = Account.objects.get_or_create(name=name)
    return account


@transaction.atomic
def create_api_key(account_name: str, key_name: str = "") -> str:
    """Issue a key for the account (created if missing) and return the raw key, shown only once."""
    account = get_or_create_account(account_name)
    _, raw_key = ApiKey.issue(account, name=key_name)
    return raw_key


@transaction.atomic
def add_member(account_name: str, username: str, role: str,
               password: str | None = None) -> tuple[User, bool]:
    """Give `username` `role` in the account, creating either if missing; returns (user, created).

    Members are staff so they can log into the admin. An existing user's password
    changes only when `password` is given; a new user without one cannot log in.
    """
    if role not in Membership.Role.values:
        raise ValueError(f"role must be one of {', '.join(Membership.Role.values)}")
    if not username:
        raise ValueError("username must not be empty")
    account = get_or_create_account(account_name)

    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username, defaults={"is_staff": True})
    changed = []
    if password:
        user.set_password(password)
        changed.append("password")
    elif created:
        user.set_unusable_password()
        changed.append("password")
    if not user.is_staff:
        user.is_staff = True
        changed.append("is_staff")
    if changed:
        user.save(update_fields=changed)

    Membership.objects.update_or_create(user=user, account=account, defaults={"role": role})
    return user, created


def users_addable_by(admin_account_ids: Iterable[int]) -> models.QuerySet[User]:
    """Users an account admin may add to an account: active, not operators, and already members of
    an account that admin administers (users created for an account by `add_member` are members)."""
    return get_user_model().objects.filter(
        is_active=True, is_superuser=False, memberships__account__in=admin_account_ids).distinct()


def lock_account(account_id: int) -> None:
    """Hold the account's row until the transaction ends, so changes to its chains apply one after
    the other (a row lock on PostgreSQL; SQLite serialises writers anyway). Call inside atomic()."""
    list(Account.objects.select_for_update().filter(pk=account_id).values_list("pk", flat=True))

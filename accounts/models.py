"""Accounts, memberships of Django users in them, and hashed API keys."""
from __future__ import annotations

import hashlib
import hmac
import secrets
import string
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from .key_lookup import lookup as key_lookup

KEY_SCHEME = "mh"
PREFIX_LENGTH = 8
SECRET_LENGTH = 32
# Letters and digits only: URL-safe, selectable with a double click, and never
# confused with the "_" separators.
KEY_ALPHABET = string.ascii_letters + string.digits
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _random_string(length: int) -> str:
    return "".join(secrets.choice(KEY_ALPHABET) for _ in range(length))


def hash_key(raw_key: str) -> str:
    """Hex SHA-256 of a raw key; the secret is random enough that no salt or stretching is needed."""
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


def parse_key(raw_key: object) -> str | None:
    """Return the prefix of a well-formed `mh_<prefix>_<secret>` key, or None."""
    if not isinstance(raw_key, str):
        return None
    parts = raw_key.split("_")
    if len(parts) != 3:
        return None
    scheme, prefix, secret = parts
    if scheme != KEY_SCHEME or len(prefix) != PREFIX_LENGTH or len(secret) != SECRET_LENGTH:
        return None
    if not all(char in KEY_ALPHABET for char in prefix + secret):
        return None
    return prefix


class Account(models.Model):
    name = models.CharField(max_length=100, unique=True)
    hooks_version = models.PositiveBigIntegerField(
        default=0,
        help_text="Change marker: bumped whenever the account's installed hooks change.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        ADMIN = "admin", "Admin"
        AUDITOR = "auditor", "Auditor"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "account"], name="accounts_membership_user_account_unique"),
        ]
        ordering = ["account__name", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) in {self.account}"


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)

    def revoke(self) -> int:
        """Revoke every still-active key in the queryset; returns how many were revoked."""
        return self.active().update(revoked_at=timezone.now())


class ApiKey(models.Model):
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, unique=True, editable=False)  # unique implies an index
    hashed = models.CharField(max_length=64, editable=False, help_text="Hex SHA-256 of the raw key.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.account} / {self.name or self.prefix}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @classmethod
    def issue(cls, account: Account, name: str = "") -> tuple[ApiKey, str]:
        """Create a key for `account`; returns (api_key, raw_key). The raw key is not stored anywhere."""
        api_key = cls(account=account, name=name)
        raw_key = api_key.save_with_new_secret()
        return api_key, raw_key

    def save_with_new_secret(self) -> str:
        """Give this unsaved key a fresh prefix and secret, insert it, and return the raw key."""
        if not self._state.adding:
            raise ValueError("an existing API key cannot be given a new secret; issue a new key")
        for attempt in range(3):
            self.prefix = _random_string(PREFIX_LENGTH)
            raw_key = f"{KEY_SCHEME}_{self.prefix}_{_random_string(SECRET_LENGTH)}"
            self.hashed = hash_key(raw_key)
            try:
                with transaction.atomic():
                    self.save(force_insert=True)
            except IntegrityError:
                # Only a prefix collision (about one in 10^14) is worth another draw.
                if attempt == 2 or not ApiKey.objects.filter(prefix=self.prefix).exists():
                    raise
            else:
                return raw_key
        raise AssertionError("unreachable: the third IntegrityError is raised above")

    @classmethod
    def lookup(cls, raw_key: str) -> ApiKey | None:
        """The active key matching `raw_key` (with its account loaded), or None."""
        prefix = parse_key(raw_key)
        if prefix is None:
            return None
        api_key = key_lookup.active_key(prefix)   # one written statement (key_lookup.py says why)
        if api_key is None or not hmac.compare_digest(api_key.hashed, hash_key(raw_key)):
            return None
        return api_key

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])

    def use_is_news(self, now: datetime) -> bool:
        """Whether a use at `now` is worth writing (the one recorded is older than the resolution)."""
        return self.last_used_at is None or now - self.last_used_at >= LAST_USED_RESOLUTION

    @staticmethod
    def write_uses(uses: Iterable[tuple[int, datetime]]) -> None:
        """Writes each (key pk, when) in one statement. The condition keeps concurrent writers (and
        late ones) from writing over a recent use."""
        table, ops = connection.ops.quote_name(ApiKey._meta.db_table), connection.ops
        with connection.cursor() as cursor:
            cursor.executemany(
                f"UPDATE {table} SET last_used_at = %s WHERE id = %s AND (last_used_at IS NULL OR last_used_at < %s)",
                [(ops.adapt_datetimefield_value(now), pk, ops.adapt_datetimefield_value(now - LAST_USED_RESOLUTION))
                 for pk, now in sorted(uses)])   # by key: concurrent writers lock rows in one order

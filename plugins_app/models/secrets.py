"""An account's secrets: write-only values encrypted at rest, each bound to the hosts it may be sent to."""

from __future__ import annotations

from cryptography.fernet import InvalidToken, MultiFernet
from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from accounts.models import Account
from plugins_app.runtime.tables.permissions import SECRET_NAME as NAME_PATTERN

from .ciphers import derived_cipher

MAX_VALUE_BYTES = 8 * 1024


def secret_cipher() -> MultiFernet:
    """Encrypts with HUB_SECRETS_KEY (or SECRET_KEY); decrypts with that, HUB_SECRETS_KEY_FALLBACKS,
    SECRET_KEY and SECRET_KEY_FALLBACKS, so a new key does not strand stored values."""
    config = settings.HUB_SECRETS
    primary = config.key or settings.SECRET_KEY
    return derived_cipher(b"middleware-hub account secrets", primary,
                          [*config.key_fallbacks, settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])])


class Secret(models.Model):
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=64, validators=[RegexValidator(f"^{NAME_PATTERN}$")],
                            help_text="Plugins write {{secret.NAME}}; A-Z, 0-9 and _, starting with a letter.")
    value_encrypted = models.BinaryField(editable=False)
    allowed_hosts = models.JSONField(default=list, help_text="Where the value may be sent: exact names, "
                                                             "addresses, or *.suffix for subdomains, each https on "
                                                             "443 unless it names http:// or a :port.")
    description = models.CharField(max_length=500, blank=True)
    set_by = models.CharField(max_length=150, blank=True, editable=False,
                              help_text="The user or API key that last set the value.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["account", "name"], name="plugins_app_secret_account_name")]

    def __str__(self) -> str:
        return self.name

    def set_value(self, value: str) -> None:
        self.value_encrypted = secret_cipher().encrypt(value.encode())

    def value(self) -> str:
        try:
            return secret_cipher().decrypt(bytes(self.value_encrypted)).decode()
        except InvalidToken:
            raise ValueError(f"secret {self.name} of account {self.account_id} cannot be decrypted with the "
                             "configured keys (was HUB_SECRETS_KEY changed without keeping the old one in "
                             "HUB_SECRETS_KEY_FALLBACKS?)") from None

    def reencrypt(self) -> None:
        """Encrypt the value again with the current primary key (it may have been written with a fallback)."""
        try:
            self.value_encrypted = secret_cipher().rotate(bytes(self.value_encrypted))
        except InvalidToken:
            raise ValueError(f"secret {self.name} of account {self.account_id} cannot be decrypted with the "
                             "configured keys; nothing was re-encrypted") from None

"""An account's SSH servers (private keys encrypted at rest) and the turns that opened them."""

from cryptography.fernet import InvalidToken, MultiFernet
from django.conf import settings
from django.db import models

from accounts.models import Account

from .ciphers import derived_cipher


def key_cipher() -> MultiFernet:
    """Encrypts with HUB_SSH_KEY_SECRET (or SECRET_KEY); decrypts with that, SECRET_KEY and
    SECRET_KEY_FALLBACKS, so setting or rotating a secret does not strand stored keys."""
    primary = settings.HUB_SSH.key_secret or settings.SECRET_KEY
    return derived_cipher(b"middleware-hub ssh private keys", primary,
                          [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])])


class SshHost(models.Model):
    class ConnectionType(models.TextChoices):
        DIRECT = "direct", "Direct"
        TUNNEL = "tunnel", "Tunnel through a jump host"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="ssh_hosts")
    display_name = models.CharField(max_length=100)
    hostname = models.CharField(max_length=255, help_text="For a tunnel host: as the jump host reaches it.")
    port = models.PositiveIntegerField(null=True, blank=True, help_text="Null for a tunnel host.")
    connection_type = models.CharField(max_length=8, choices=ConnectionType.choices, default=ConnectionType.DIRECT)
    # RESTRICT: a jump host in use cannot be deleted alone, but goes with its account like the rest.
    jump_host = models.ForeignKey("self", null=True, blank=True, on_delete=models.RESTRICT,
                                  related_name="tunnel_hosts", help_text="The direct host a tunnel goes through.")
    tunnel_port = models.PositiveIntegerField(null=True, blank=True,
                                              help_text="A tunnel host's SSH port as the jump host sees it.")
    username = models.CharField(max_length=64)
    private_key_encrypted = models.BinaryField(editable=False)
    public_key = models.TextField(editable=False, help_text="The public half of the private key.")
    host_key = models.TextField(help_text="The server's pinned host key (an OpenSSH public key line).")
    host_key_fingerprint = models.CharField(max_length=100, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["display_name", "id"]
        verbose_name = "SSH host"
        constraints = [
            models.UniqueConstraint(fields=["account", "display_name"], name="plugins_app_sshhost_account_name_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.display_name} ({self.username}@{self.hostname})"

    @property
    def is_tunnel(self) -> bool:
        return self.connection_type == self.ConnectionType.TUNNEL

    def set_private_key(self, pem: str) -> None:
        self.private_key_encrypted = key_cipher().encrypt(pem.encode())

    def private_key(self) -> str:
        try:
            return key_cipher().decrypt(bytes(self.private_key_encrypted)).decode()
        except InvalidToken:
            raise ValueError(f"the private key of SSH host {self.pk} cannot be decrypted with the "
                             f"configured secret (was HUB_SSH_KEY_SECRET or SECRET_KEY changed?)") from None


class SshTurn(models.Model):
    """sshConnectionOpening fired for (server, session, turn): its verdict holds for the turn."""

    class State(models.TextChoices):
        OPENING = "opening"
        OPEN = "open"
        REFUSED = "refused"

    ssh_host = models.ForeignKey(SshHost, on_delete=models.CASCADE, related_name="turns")
    session_id = models.CharField(max_length=64)
    turn_id = models.CharField(max_length=64)
    state = models.CharField(max_length=8, choices=State.choices, default=State.OPENING)
    cancellation = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "SSH turn"
        constraints = [
            models.UniqueConstraint(fields=["ssh_host", "session_id", "turn_id"],
                                    name="plugins_app_sshturn_host_session_turn_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.ssh_host_id}/{self.session_id}/{self.turn_id}: {self.state}"

"""What the host surface stores: the platform bridge, plugin logs, agents and their workspaces."""

from django.db import models

from accounts.models import Account


class PlatformConfig(models.Model):
    """Where the account's platform listens, and the secret the hub signs its calls with."""

    account = models.OneToOneField(Account, on_delete=models.CASCADE, related_name="platform")
    base_url = models.URLField(max_length=500, help_text="e.g. https://platform.example.com/hub")
    # Kept in clear because the hub signs with it; never shown again once saved.
    signing_secret = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "platform bridge"

    def __str__(self):
        return f"platform of {self.account}: {self.base_url}"

    @property
    def has_secret(self) -> bool:
        return bool(self.signing_secret)

"""What host.kv stores: each installation's keys, with their JSON values or counters and expiry."""

from django.db import models

from accounts.models import Account

from .plugins import Installation


class KvEntry(models.Model):
    """One key of an installation's store (services/kv/store.py). A counter (host.kv.incr) keeps its
    integer in `number` so the database adds to it in one statement; any other value is JSON text."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="kv_entries")
    installation = models.ForeignKey(Installation, on_delete=models.CASCADE, related_name="kv_entries")
    key = models.CharField(max_length=512)
    value = models.TextField(null=True, blank=True, help_text="JSON text; empty for a counter.")
    number = models.BigIntegerField(null=True, blank=True, help_text="A counter's value.")
    size = models.PositiveIntegerField(help_text="Bytes of the key and the value, as the quota counts them.")
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["installation", "key"]
        verbose_name = "kv entry"
        verbose_name_plural = "kv entries"
        constraints = [models.UniqueConstraint(fields=["installation", "key"], name="one_kv_entry_per_key")]
        indexes = [models.Index(fields=["account"], name="kv_entry_account")]

    def __str__(self) -> str:
        return f"{self.installation_id}:{self.key}"

"""What the hub records of chains that ran: cancels, handler warnings, and daily usage."""

from typing import Any, NoReturn

from django.db import models

from accounts.models import Account

from .plugins import HOOK_CHOICES, Installation, Plugin


class ImmutableRecordError(Exception):
    pass


class ImmutableModel(models.Model):
    """Rows written once and never changed or deleted one by one (an audit trail)."""

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ImmutableRecordError(f"{type(self).__name__} rows cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ImmutableRecordError(f"{type(self).__name__} rows cannot be deleted")


class CancelLog(ImmutableModel):
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="cancel_logs")
    hook = models.CharField(max_length=40, choices=HOOK_CHOICES, db_index=True)
    installation = models.ForeignKey(Installation, null=True, on_delete=models.SET_NULL, related_name="+")
    plugin = models.ForeignKey(Plugin, null=True, on_delete=models.SET_NULL, related_name="+")
    plugin_slug = models.CharField(max_length=100, db_index=True)
    reason = models.CharField(max_length=500, blank=True)
    plugin_version = models.PositiveIntegerField(null=True, blank=True, help_text="The version that cancelled.")
    context = models.JSONField(help_text="The context the cancelling handler saw.")
    session_id = models.CharField(max_length=64, blank=True, db_index=True)
    agent_id = models.CharField(max_length=64, blank=True, db_index=True)
    hop = models.PositiveSmallIntegerField(default=0)
    turn_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "cancel log entry"
        verbose_name_plural = "cancel log"

    def __str__(self) -> str:
        return f"{self.hook} cancelled by {self.plugin_slug}"


class HandlerWarning(ImmutableModel):
    class Kind(models.TextChoices):
        ERROR = "error", "Error"
        TIMEOUT = "timeout", "Timeout"
        MALFORMED = "malformed", "Malformed result"
        ENGINE_RESTART = "engine_restart", "Engine restart"
        QUARANTINED = "quarantined", "Quarantined"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="handler_warnings")
    hook = models.CharField(max_length=40, choices=HOOK_CHOICES, db_index=True)
    installation = models.ForeignKey(Installation, null=True, on_delete=models.SET_NULL, related_name="+")
    plugin_slug = models.CharField(max_length=100, db_index=True)
    kind = models.CharField(max_length=20, choices=Kind.choices, db_index=True)
    plugin_version = models.PositiveIntegerField(null=True, blank=True, help_text="The version that ran.")
    message = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} in {self.plugin_slug} ({self.hook})"


class UsageDaily(models.Model):
    """Handler runs and time per plugin per hook per day; only handlers that actually ran count."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="usage")
    plugin_slug = models.CharField(max_length=100)
    hook = models.CharField(max_length=40, choices=HOOK_CHOICES)
    day = models.DateField(db_index=True)
    runs = models.PositiveBigIntegerField(default=0)
    total_ms = models.FloatField(default=0)
    # Calls where the plugin's matcher left its handler out (runtime/matching/): not runs, not metered.
    skipped = models.PositiveBigIntegerField(default=0)
    kv_reads = models.PositiveBigIntegerField(default=0, help_text="host.kv get and list calls.")
    kv_writes = models.PositiveBigIntegerField(default=0, help_text="host.kv put, delete and incr calls.")

    class Meta:
        ordering = ["-day", "plugin_slug", "hook"]
        verbose_name_plural = "usage"
        constraints = [
            models.UniqueConstraint(fields=["account", "plugin_slug", "hook", "day"], name="one_usage_row_per_day"),
        ]

    def __str__(self) -> str:
        return f"{self.plugin_slug}/{self.hook} {self.day}: {self.runs}"

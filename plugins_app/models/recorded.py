"""Recorded execute calls: a bounded, redacted sample per account and hook, to check versions against."""

from django.db import models

from accounts.models import Account

from .plugins import HOOK_CHOICES


class RecordedCall(models.Model):
    """One live call as the chain received it (secret values redacted), the versions that ran and the outcome.
    Written off the request path (services/versions/recording.py) and pruned to the account's bounds."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="recorded_calls")
    hook = models.CharField(max_length=40, choices=HOOK_CHOICES)
    context = models.JSONField(help_text="The context as received, secret values redacted.")
    hop = models.PositiveSmallIntegerField(default=0)
    turn_id = models.CharField(max_length=64, blank=True)
    versions = models.JSONField(default=dict, help_text="Installation id -> the version that ran.")
    outcome = models.CharField(max_length=10)   # unchanged | changed | cancelled
    value = models.JSONField(null=True, blank=True, help_text="The chain's resulting value, redacted.")
    cancelled_by = models.CharField(max_length=100, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["account", "hook", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.hook} call ({self.outcome})"

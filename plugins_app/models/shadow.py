"""What shadow runs saw: per-installation counts and recent examples (nothing of it was applied)."""

from django.db import models

from .plugins import HOOK_CHOICES, Installation


class ShadowStat(models.Model):
    """Counts since the installation (or its shadowed draft) last went into shadow."""

    installation = models.OneToOneField(Installation, on_delete=models.CASCADE, related_name="shadow_stat")
    calls = models.PositiveBigIntegerField(default=0)
    would_cancel = models.PositiveBigIntegerField(default=0)
    would_change = models.PositiveBigIntegerField(default=0, help_text="Different values (the older name).")
    failed = models.PositiveBigIntegerField(default=0)
    same = models.PositiveBigIntegerField(default=0)
    would_no_longer_cancel = models.PositiveBigIntegerField(default=0)
    since = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"shadow of {self.installation}: {self.calls} calls"


class ShadowSample(models.Model):
    """One recent example; only the newest few of each kind are kept per installation."""

    class Kind(models.TextChoices):
        CANCEL = "cancel", "Would have cancelled"
        CHANGE = "change", "Would have changed"
        FAILURE = "failure", "Failed"
        SAME = "same", "Same as the live version"
        UNCANCEL = "uncancel", "Would no longer cancel"

    installation = models.ForeignKey(Installation, on_delete=models.CASCADE, related_name="shadow_samples")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    hook = models.CharField(max_length=40, choices=HOOK_CHOICES)
    version = models.PositiveIntegerField(null=True, blank=True)
    message = models.CharField(max_length=500, blank=True, help_text="The cancel reason, or the failure.")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    # The comparison side by side (services/versions/compare.py): input, live and candidate results.
    example = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["installation", "kind", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.kind} by {self.installation}"

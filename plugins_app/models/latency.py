"""Handler latency histograms and status counts per plugin per hook, per minute, hour and day."""

from django.db import models

from accounts.models import Account

from .plugins import HOOK_CHOICES


class LatencyHistogram(models.Model):
    """One window of one plugin's handler runs on one hook: a sparse histogram of durations
    (bucket index -> count, see services/observability/latency.py for the bounds), exact min/max/sum, and how
    many runs ended in each status. Histograms of several windows merge by adding counts."""

    class Resolution(models.TextChoices):
        MINUTE = "minute"
        HOUR = "hour"
        DAY = "day"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="latency")
    plugin_slug = models.CharField(max_length=100)
    hook = models.CharField(max_length=40, choices=HOOK_CHOICES)
    resolution = models.CharField(max_length=6, choices=Resolution.choices)
    start = models.DateTimeField()
    runs = models.PositiveBigIntegerField(default=0)   # handlers that ran (quarantined skips excluded)
    total_ms = models.FloatField(default=0)
    min_ms = models.FloatField(null=True)
    max_ms = models.FloatField(null=True)
    buckets = models.JSONField(default=dict)
    statuses = models.JSONField(default=dict)           # status -> count, quarantined included

    class Meta:
        ordering = ["-start", "plugin_slug", "hook"]
        constraints = [models.UniqueConstraint(fields=["account", "plugin_slug", "hook", "resolution", "start"],
                                               name="one_latency_row_per_window")]
        indexes = [models.Index(fields=["account", "resolution", "start"], name="latency_account_window")]

    def __str__(self) -> str:
        return f"{self.plugin_slug}/{self.hook} {self.resolution} {self.start:%Y-%m-%d %H:%M}: {self.runs}"

"""Scheduled missions (cron jobs and their runs) and agents' timers (notifications)."""

from django.db import models
from django.db.models import Q
from django_celery_beat.models import PeriodicTask

from accounts.models import Account


class CronJob(models.Model):
    """A mission an agent runs on a schedule. Its PeriodicTask (django-celery-beat) is derived
    from `cron_expression` / `interval_seconds` and `enabled` by services.scheduling.cron, never by hand."""

    class Kind(models.TextChoices):
        CRON_JOB = "cron_job", "Cron job"
        HEARTBEAT = "heartbeat", "Heartbeat"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="cron_jobs")
    agent_id = models.CharField(max_length=64, help_text="The platform's id of the agent that runs the mission.")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CRON_JOB)
    name = models.CharField(max_length=200)
    prompt = models.TextField()
    cron_expression = models.CharField(
        max_length=120, blank=True,
        help_text='Five crontab fields: minute hour day-of-month month day-of-week, e.g. "*/15 * * * *".')
    interval_seconds = models.PositiveIntegerField(null=True, blank=True,
                                                   help_text="Or: run every this many seconds.")
    timezone = models.CharField(max_length=64, default="UTC", help_text="The time zone a crontab is read in.")
    enabled = models.BooleanField(default=True)
    periodic_task = models.OneToOneField(PeriodicTask, null=True, blank=True, editable=False,
                                         on_delete=models.SET_NULL, related_name="cron_job")
    # When beat sent the interval slot that last fired (services.scheduling.cron claims each slot by a
    # conditional update of this column, so two beats sending one tick fire it once).
    slot_claimed_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(cron_expression="") & Q(interval_seconds__isnull=False))
                | (~Q(cron_expression="") & Q(interval_seconds__isnull=True)),
                name="cron_job_has_one_schedule"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def schedule_display(self) -> str:
        if self.interval_seconds:
            return f"every {self.interval_seconds} s"
        return f"{self.cron_expression} ({self.timezone})"


def delete_periodic_task(sender, instance: CronJob, **kwargs):
    """A post_delete receiver (connected in the app's ready()): a deleted job's beat entry goes too.
    Also on cascades (an account deleted), which never call CronJob.delete()."""
    if instance.periodic_task_id:
        PeriodicTask.objects.filter(pk=instance.periodic_task_id).delete()


class CronRun(models.Model):
    """One slot of a cron job: skipped, cancelled, or a mission that ran. A partial unique index
    allows one active run per job, which is what makes the overlap check race-free."""

    class Status(models.TextChoices):
        FIRING = "firing", "Firing"                # passed the overlap check; cronJobFiring runs
        DISPATCHING = "dispatching", "Dispatching"  # being handed to the platform
        RUNNING = "running", "Running"
        SKIPPED = "skipped", "Skipped"
        CANCELLED = "cancelled", "Cancelled"
        DISPATCH_FAILED = "dispatch_failed", "Dispatch failed"
        EXPIRED = "expired", "Expired"              # no completion heard in time
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        TIMED_OUT = "timed_out", "Timed out"
        ABORTED = "aborted", "Aborted"

    ACTIVE = (Status.FIRING, Status.DISPATCHING, Status.RUNNING)
    # What the platform may close a running run with.
    CLOSING = (Status.COMPLETED, Status.FAILED, Status.TIMED_OUT, Status.ABORTED)

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", "Schedule"
        MANUAL = "manual", "Run now"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="cron_runs")
    job = models.ForeignKey(CronJob, on_delete=models.CASCADE, related_name="runs")
    # The task id that fired the slot: a redelivered message finds its run instead of firing again.
    trigger_key = models.CharField(max_length=64, unique=True, editable=False)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.FIRING, db_index=True)
    reason = models.CharField(max_length=500, blank=True)
    cancelled_by = models.CharField(max_length=100, blank=True, help_text="The plugin that cancelled the slot.")
    prompt = models.TextField(blank=True, help_text="The prompt the mission got (after cronJobFiring).")
    session_id = models.CharField(max_length=64, blank=True, help_text="The platform's session of the mission.")
    slot_at = models.DateTimeField(db_index=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    completed_hook_at = models.DateTimeField(null=True, blank=True, editable=False,
                                             help_text="When cronJobCompleted was fired (at most once).")

    class Meta:
        ordering = ["-slot_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["job"], condition=Q(status__in=["firing", "dispatching", "running"]),
                                    name="one_active_run_per_cron_job"),
        ]

    def __str__(self) -> str:
        return f"{self.job} at {self.slot_at:%Y-%m-%d %H:%M:%S}: {self.get_status_display()}"


class Notification(models.Model):
    """An agent's timer to itself. The row is the source of truth: `due_at` survives restarts and
    beat's sweep delivers whatever is due; status changes are conditional updates."""

    class Status(models.TextChoices):
        SCHEDULED = "scheduled", "Scheduled"
        CANCELLED = "cancelled", "Cancelled"      # by notifyScheduled: never scheduled
        DELIVERING = "delivering", "Delivering"
        DELIVERED = "delivered", "Delivered"
        DROPPED = "dropped", "Dropped"            # by notifyDelivered
        FAILED = "failed", "Failed"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="notifications")
    session_id = models.CharField(max_length=64, db_index=True)
    requested_message = models.TextField()
    requested_delay_seconds = models.FloatField()
    message = models.TextField(help_text="The note as scheduled (after notifyScheduled).")
    delay_seconds = models.FloatField(null=True, blank=True)
    due_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, db_index=True)
    reason = models.CharField(max_length=500, blank=True)
    cancelled_by = models.CharField(max_length=100, blank=True)
    delivered_message = models.TextField(null=True, blank=True,
                                         help_text="The note as delivered (after notifyDelivered).")
    queued_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The delivery task that claimed the row; its own retries carry the same id, duplicates do not.
    claimed_by = models.CharField(max_length=64, blank=True, editable=False)
    claimed_at = models.DateTimeField(null=True, blank=True, editable=False)
    hook_fired_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "due_at"], name="notification_status_due")]

    def __str__(self) -> str:
        return f"timer for session {self.session_id}: {self.get_status_display()}"

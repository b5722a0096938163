"""Request and response shapes of cron jobs, their runs, and timers; ids leave the hub as strings."""

from typing import Any

from rest_framework import serializers

from plugins_app.api.base import StrIdField
from plugins_app.api.execution.serializers import CancellationSerializer, TraceEntrySerializer
from plugins_app.models import CronJob, CronRun, Notification


class IdStringField(serializers.CharField):
    """An id sent as a string: a JSON number is refused, not converted (64-bit ids lose digits)."""

    default_error_messages = {"not_string": "ids are strings (64-bit numbers do not survive JSON numbers)"}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 64)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_string")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    default_error_messages = {"invalid": "expected true or false"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class ScheduleSerializer(serializers.Serializer):
    crontab = serializers.CharField(required=False, max_length=120,
                                    help_text='five fields: minute hour day-of-month month day-of-week')
    timezone = serializers.CharField(required=False, max_length=64, default="UTC",
                                     help_text="the time zone the crontab is read in")
    intervalSeconds = serializers.IntegerField(required=False, help_text="or: every this many seconds")


class CronJobWriteSerializer(serializers.Serializer):
    agentId = IdStringField()
    kind = serializers.ChoiceField(choices=CronJob.Kind.values, default=CronJob.Kind.CRON_JOB)
    name = serializers.CharField(max_length=200)
    prompt = serializers.CharField(trim_whitespace=False)
    schedule = ScheduleSerializer()
    enabled = StrictBooleanField(default=True)

    def service_fields(self) -> dict:
        """The validated body as services.scheduling.cron's model field names (only the fields sent, for PATCH)."""
        data = self.validated_data
        names = {"agentId": "agent_id", "kind": "kind", "name": "name", "prompt": "prompt", "enabled": "enabled"}
        fields = {names[key]: value for key, value in data.items() if key in names}
        if "schedule" in data:
            schedule = data["schedule"]
            fields["cron_expression"] = schedule.get("crontab", "")
            fields["interval_seconds"] = schedule.get("intervalSeconds")
            fields["timezone"] = schedule.get("timezone", "UTC")
        return fields


class CronJobSerializer(serializers.ModelSerializer):
    id = StrIdField(source="pk")
    agentId = serializers.CharField(source="agent_id")
    schedule = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    class Meta:
        model = CronJob
        fields = ["id", "agentId", "kind", "name", "prompt", "schedule", "enabled", "createdAt", "updatedAt"]

    def get_schedule(self, job) -> dict:
        if job.interval_seconds:
            return {"intervalSeconds": job.interval_seconds}
        return {"crontab": job.cron_expression, "timezone": job.timezone}


class CronRunSerializer(serializers.ModelSerializer):
    id = StrIdField(source="pk")
    cronJobId = StrIdField(source="job_id")
    cancelledBy = serializers.CharField(source="cancelled_by")
    sessionId = serializers.CharField(source="session_id")
    slotAt = serializers.DateTimeField(source="slot_at")
    dispatchedAt = serializers.DateTimeField(source="dispatched_at")
    finishedAt = serializers.DateTimeField(source="finished_at")
    durationSeconds = serializers.SerializerMethodField(help_text="from dispatch to close, once closed")

    class Meta:
        model = CronRun
        fields = ["id", "cronJobId", "trigger", "status", "reason", "cancelledBy", "prompt", "sessionId",
                  "slotAt", "dispatchedAt", "finishedAt", "durationSeconds"]

    def get_durationSeconds(self, run) -> float | None:
        if run.dispatched_at and run.finished_at:
            return round((run.finished_at - run.dispatched_at).total_seconds(), 3)
        return None


class CompleteRequestSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=list(CronRun.CLOSING))
    sessionId = IdStringField(required=False, help_text="the mission's session, if /missions did not answer it")


class NotificationRequestSerializer(serializers.Serializer):
    # Types are checked by services.scheduling.notifications (a JSON true is not 1 second).
    sessionId = serializers.JSONField(help_text="string id")
    message = serializers.JSONField(help_text="string")
    delaySeconds = serializers.JSONField(help_text="a finite number >= 0")


class NotificationSerializer(serializers.ModelSerializer):
    id = StrIdField(source="pk")
    sessionId = serializers.CharField(source="session_id")
    requestedMessage = serializers.CharField(source="requested_message")
    requestedDelaySeconds = serializers.FloatField(source="requested_delay_seconds")
    delaySeconds = serializers.FloatField(source="delay_seconds")
    dueAt = serializers.DateTimeField(source="due_at")
    cancelledBy = serializers.CharField(source="cancelled_by")
    deliveredMessage = serializers.CharField(source="delivered_message")
    deliveredAt = serializers.DateTimeField(source="delivered_at")
    lastError = serializers.CharField(source="last_error")
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = Notification
        fields = ["id", "sessionId", "status", "message", "delaySeconds", "dueAt", "reason", "cancelledBy",
                  "requestedMessage", "requestedDelaySeconds", "deliveredMessage", "deliveredAt", "lastError",
                  "createdAt"]


class NotificationOutcomeSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=["scheduled", "cancelled"])
    notification = NotificationSerializer()
    cancellation = CancellationSerializer(allow_null=True)
    trace = TraceEntrySerializer(many=True)
    effects = serializers.ListField(child=serializers.DictField())

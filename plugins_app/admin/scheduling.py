"""Admin pages for cron jobs (with their recent runs and a run-now action), run history and timers."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet
from django.urls import reverse
from django.utils.html import format_html

from plugins_app.errors import HubError, InvalidInput
from plugins_app.models import CronJob, CronRun, Notification
from plugins_app.services.scheduling import cron

from .scoping import AccountScopedAdmin, AccountScopedTabularInline, ReadOnlyAccountScopedAdmin, per_object_action

RECENT_RUNS = 20
# services.scheduling.cron names fields as the API does; the form's fields are the model's.
FORM_FIELDS = {"agentId": "agent_id", "name": "name", "prompt": "prompt", "kind": "kind", "enabled": "enabled",
               "schedule.crontab": "cron_expression", "schedule.intervalSeconds": "interval_seconds",
               "schedule.timezone": "timezone"}


class CronJobForm(forms.ModelForm):
    class Meta:
        model = CronJob
        fields = ["account", "name", "agent_id", "kind", "prompt", "cron_expression", "interval_seconds",
                  "timezone", "enabled"]
        widgets = {"prompt": forms.Textarea(attrs={"rows": 6})}

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if self.errors:
            return cleaned
        values = {name: cleaned.get(name) for name in cron.FIELDS}
        values["cron_expression"] = values["cron_expression"] or ""
        try:
            cleaned.update(cron.clean_fields(values))
        except InvalidInput as exc:
            field = FORM_FIELDS.get(exc.extra["field"])
            message = str(exc.detail).split(": ", 1)[-1]
            if exc.extra.get("field") == "schedule":
                message = "Give either a crontab or an interval in seconds, not both."
            raise ValidationError({field: message} if field else message) from None
        return cleaned


class RecentRunsFormSet(BaseInlineFormSet):
    def get_queryset(self):
        # A job that fires every minute has thousands of runs: the page shows the newest.
        return super().get_queryset()[:RECENT_RUNS]


class CronRunInline(AccountScopedTabularInline):
    model = CronRun
    formset = RecentRunsFormSet
    verbose_name_plural = f"recent runs (newest {RECENT_RUNS})"
    fields = ("slot_at", "trigger", "status", "reason", "cancelled_by", "prompt", "dispatched_at", "finished_at")
    readonly_fields = fields
    ordering = ["-slot_at", "-id"]
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(CronJob)
class CronJobAdmin(AccountScopedAdmin):
    form = CronJobForm
    inlines = [CronRunInline]
    list_display = ["name", "kind", "agent_id", "schedule", "enabled", "last_run", "account"]
    list_filter = ["enabled", "kind", "account"]
    list_select_related = ["account"]
    search_fields = ["name", "prompt", "agent_id"]
    readonly_fields = ["history", "created_at", "updated_at"]
    actions = ["run_now"]
    fieldsets = [
        (None, {"fields": ["account", "name", "agent_id", "kind", "prompt", "enabled"]}),
        ("Schedule", {"fields": ["cron_expression", "timezone", "interval_seconds"],
                      "description": "A crontab (read in the time zone) or an interval in seconds."}),
        ("History", {"fields": ["history", "created_at", "updated_at"]}),
    ]

    def get_readonly_fields(self, request, obj=None):
        # A job stays in its account: its runs and beat entry belong there.
        return [*self.readonly_fields, "account"] if obj else self.readonly_fields

    @admin.display(description="schedule")
    def schedule(self, job):
        return job.schedule_display

    @admin.display(description="last run")
    def last_run(self, job):
        run = job.runs.order_by("-slot_at", "-id").first()
        return f"{run.get_status_display()} at {run.slot_at:%Y-%m-%d %H:%M}" if run else "—"

    @admin.display(description="all runs")
    def history(self, job):
        if not job.pk:
            return "—"
        url = reverse("admin:plugins_app_cronrun_changelist") + f"?job__id__exact={job.pk}"
        return format_html('<a href="{}">{} runs</a>', url, job.runs.count())

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        cron.sync_schedule(obj)

    @per_object_action("change", description="Fire one slot now")
    def run_now(self, request, queryset):
        for job in queryset.select_related("account"):
            try:
                run = cron.run_now(job.account, job.pk)
            except HubError as exc:
                self.message_user(request, f"{job}: {exc.detail}", messages.ERROR)
                continue
            reason = f" ({run.reason})" if run.reason else ""
            self.message_user(request, f"{job}: {run.get_status_display().lower()}{reason}",
                              messages.WARNING if run.status in ("skipped", "cancelled") else messages.SUCCESS)


@admin.register(CronRun)
class CronRunAdmin(ReadOnlyAccountScopedAdmin):
    list_display = ["slot_at", "job", "trigger", "status", "reason", "dispatched_at", "finished_at", "account"]
    list_filter = ["status", "trigger", "job", "account"]
    list_select_related = ["job", "account"]
    search_fields = ["reason", "prompt", "session_id"]
    date_hierarchy = "slot_at"
    fields = ("job", "account", "trigger", "status", "reason", "cancelled_by", "prompt", "session_id", "slot_at",
              "dispatched_at", "finished_at", "completed_hook_at")
    readonly_fields = fields


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAccountScopedAdmin):
    list_display = ["created_at", "session_id", "status", "message", "due_at", "delivered_at", "account"]
    list_filter = ["status", "account"]
    list_select_related = ["account"]
    search_fields = ["message", "session_id", "reason"]
    date_hierarchy = "created_at"
    fields = ("account", "session_id", "status", "reason", "cancelled_by", "requested_message",
              "requested_delay_seconds", "message", "delay_seconds", "due_at", "delivered_message", "delivered_at",
              "last_error", "created_at")
    readonly_fields = fields

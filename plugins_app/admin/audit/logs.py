"""Read-only audit pages: the cancel log (with CSV export), handler warnings, and daily usage."""

from __future__ import annotations

import csv
import functools
import json

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseBadRequest, StreamingHttpResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from plugins_app.admin.audit.live import live_page, live_stream
from plugins_app.admin.audit.usage import usage_chart
from plugins_app.admin.filters import DateRangeFilter, ExactTextFilter, PluginSlugFilter, plugin_column
from plugins_app.admin.scoping import ReadOnlyAccountScopedAdmin, admin_account_ids, is_operator
from plugins_app.admin.versions.replay import replay_view
from plugins_app.models import CancelLog, HandlerWarning, Installation, UsageDaily

CSV_COLUMNS = ["id", "created_at", "account", "hook", "plugin", "plugin_version", "reason", "agent_id",
               "session_id", "hop", "turn_id", "context"]
# A spreadsheet runs a cell starting with one of these as a formula; plugins write the reasons.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class _Echo:
    def write(self, value):
        return value


@admin.register(CancelLog)
class CancelLogAdmin(ReadOnlyAccountScopedAdmin):
    count_names = ("cancel-log entry", "cancel-log entries")   # the model's plural names the whole log
    list_display = ["created_at", "hook", plugin_column, "version", "short_reason", "agent_id", "session_id",
                    "turn", "account"]
    list_filter = ["hook", ("plugin_slug", PluginSlugFilter), ("created_at", DateRangeFilter),
                   ("agent_id", ExactTextFilter), ("session_id", ExactTextFilter), "account"]
    list_select_related = ["account"]
    search_fields = ["reason"]
    search_help_text = "Search in the cancel reasons."
    fields = ("created_at", "account", "hook", "plugin_link", "version_link", "installation_link", "reason",
              "agent_id", "session_id", "hop", "turn_id", "context_snapshot", "replay_link")
    readonly_fields = fields

    def get_list_display(self, request):
        # One account's log needs no account column: the room goes to the reason.
        columns = list(super().get_list_display(request))
        if len(self.visible_account_ids(request)) == 1 and not is_operator(request):
            columns.remove("account")
        return columns

    def get_fields(self, request, obj=None):
        # An auditor cannot open an installation's page; its versions page is the one both roles read.
        fields = list(super().get_fields(request, obj))
        if obj is not None and not (is_operator(request) or obj.account_id in admin_account_ids(request)):
            fields[fields.index("installation_link")] = "installation_history_link"
        return fields

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [path("export.csv", self.admin_site.admin_view(self.export_csv), name="{}_{}_export".format(*info)),
                path("live/", self.admin_site.admin_view(functools.partial(live_page, self)),
                     name="{}_{}_live".format(*info)),
                path("live/stream", self.admin_site.admin_view(functools.partial(live_stream, self)),
                     name="{}_{}_live_stream".format(*info)),
                path("<path:object_id>/replay/", self.admin_site.admin_view(functools.partial(replay_view, self)),
                     name="{}_{}_replay".format(*info)),
                *super().get_urls()]

    def changelist_view(self, request, extra_context=None):
        export = reverse("admin:plugins_app_cancellog_export")
        return super().changelist_view(request, {"title": "Cancel log", "export_url": export,
                                                 "live_url": reverse("admin:plugins_app_cancellog_live"),
                                                 **(extra_context or {})})

    def export_csv(self, request):
        """The changelist's rows as CSV: same scope, filters, search and ordering, every page."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            # Not quoted back: the filter's value is whatever the address says.
            return HttpResponseBadRequest("a filter in the address is not valid; open the cancel log to see which",
                                          content_type="text/plain; charset=utf-8")
        rows = changelist.queryset.select_related("account").iterator(chunk_size=500)
        writer = csv.writer(_Echo())

        def lines():
            yield writer.writerow(CSV_COLUMNS)
            for row in rows:
                yield writer.writerow([_csv_cell(v) for v in (
                    row.pk, row.created_at.isoformat(), row.account.name, row.hook, row.plugin_slug,
                    row.plugin_version, row.reason,
                    row.agent_id, row.session_id, row.hop, row.turn_id,
                    json.dumps(row.context, ensure_ascii=False, sort_keys=True))])

        stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
        response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="cancel-log-{stamp}.csv"'
        return response

    @admin.display(description="version", ordering="plugin_version")
    def version(self, obj):
        return obj.plugin_version or "—"

    @admin.display(description="turn", ordering="turn_id")
    def turn(self, obj):
        return obj.turn_id or "—"

    @admin.display(description="plugin")
    def plugin_link(self, obj):
        """Every cancel by this plugin in the log (the page both roles read)."""
        url = f"{reverse('admin:plugins_app_cancellog_changelist')}?plugin_slug__exact={obj.plugin_slug}"
        return format_html('<a href="{}">{}</a> <span class="quiet">(its cancels in this log)</span>', url,
                           obj.plugin_slug)

    @admin.display(description="plugin version")
    def version_link(self, obj):
        if not obj.plugin_version or not obj.installation_id:
            return obj.plugin_version or "—"
        url = reverse("admin:plugins_app_pluginversion_installation", args=[obj.installation_id])
        return format_html('<a href="{}#version-{}">version {}</a>', url, obj.plugin_version, obj.plugin_version)

    @admin.display(description="installation")
    def installation_link(self, obj):
        installation = self._installation(obj)
        if installation is None:
            return obj.installation_id or "— (uninstalled since)"
        return format_html('<a href="{}">{} in {}</a>', reverse("admin:plugins_app_installation_change",
                                                                args=[installation.pk]),
                           installation.plugin.name, installation.account)

    @admin.display(description="installation")
    def installation_history_link(self, obj):
        installation = self._installation(obj)
        if installation is None:
            return obj.installation_id or "— (uninstalled since)"
        return format_html('<a href="{}">{} in {}: its versions</a>',
                           reverse("admin:plugins_app_pluginversion_installation", args=[installation.pk]),
                           installation.plugin.name, installation.account)

    @staticmethod
    def _installation(obj):
        if not obj.installation_id:
            return None
        return Installation.objects.filter(pk=obj.installation_id, account_id=obj.account_id).select_related(
            "plugin", "account").first()

    @admin.display(description="reason")
    def short_reason(self, obj):
        return obj.reason if len(obj.reason) <= 80 else obj.reason[:79] + "…"

    @admin.display(description="replay")
    def replay_link(self, obj):
        return format_html('<a class="button" href="{}">Replay against the current chain or a draft</a>',
                           reverse("admin:plugins_app_cancellog_replay", args=[obj.pk]))

    @admin.display(description="context the cancelling handler saw")
    def context_snapshot(self, obj):
        return format_html('<pre class="hub-code">{}</pre>',
                           json.dumps(obj.context, indent=2, ensure_ascii=False, sort_keys=True))


@admin.register(HandlerWarning)
class HandlerWarningAdmin(ReadOnlyAccountScopedAdmin):
    list_display = ["created_at", "hook", plugin_column, "kind", "short_message", "account"]
    list_filter = ["kind", "hook", ("plugin_slug", PluginSlugFilter),
                   ("created_at", DateRangeFilter), "account"]
    list_select_related = ["account"]
    search_fields = ["message"]
    fields = ("created_at", "account", "hook", "plugin_slug", "plugin_version", "installation_id", "kind", "message")
    readonly_fields = fields

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Handler warnings", **(extra_context or {})})

    @admin.display(description="message")
    def short_message(self, obj):
        return obj.message if len(obj.message) <= 100 else obj.message[:99] + "…"


@admin.register(UsageDaily)
class UsageDailyAdmin(ReadOnlyAccountScopedAdmin):
    count_names = ("usage row (a plugin's runs on one hook in one day)", "usage rows (a plugin's runs on one hook "
                   "in one day each)")
    list_display = ["day", plugin_column, "hook", "runs", "skipped", "total_time", "average_time", "kv_reads",
                    "kv_writes", "account"]
    list_filter = [("plugin_slug", PluginSlugFilter), "hook", ("day", DateRangeFilter), "account"]
    list_select_related = ["account"]
    fields = ("day", "account", "plugin_slug", "hook", "runs", "skipped", "total_time", "average_time", "kv_reads",
              "kv_writes")
    readonly_fields = fields
    change_list_template = "admin/plugins_app/usagedaily/change_list.html"

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, {"title": "Usage: handler runs and time",
                                                     **(extra_context or {})})
        changelist = getattr(response, "context_data", {}).get("cl")
        if changelist is not None:
            response.context_data["chart"] = usage_chart(changelist.queryset, timezone.localdate())
        return response

    @admin.display(description="time", ordering="total_ms")
    def total_time(self, obj):
        return f"{obj.total_ms:,.1f} ms"

    @admin.display(description="average")
    def average_time(self, obj):
        return f"{obj.total_ms / obj.runs:,.2f} ms" if obj.runs else "—"

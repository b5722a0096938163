"""The latency page: charts of calls, percentiles and failure rates, and the worst plugins first."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from plugins_app.admin.filters import PluginSlugFilter
from plugins_app.admin.scoping import ReadOnlyAccountScopedAdmin
from plugins_app.models import LatencyHistogram
from plugins_app.services.observability.latency import Window
from plugins_app.services.observability.latency_report import DEFAULT_RANGE, RANGES, failure_rate, report, windows_in


def _range_of(request) -> str:
    value = request.GET.get(RangeFilter.parameter_name)
    return value if value in RANGES else DEFAULT_RANGE


class RangeFilter(admin.SimpleListFilter):
    """Last hour (per minute), last 24 hours (per hour) or last 30 days (per day); never "all"."""

    title = "range"
    parameter_name = "range"

    def lookups(self, request, model_admin):
        return [(r.key, r.title) for r in RANGES.values()]

    def value(self):
        value = super().value()
        return value if value in RANGES else DEFAULT_RANGE

    def choices(self, changelist):
        for key, title in self.lookup_choices:
            yield {"selected": self.value() == key, "display": title,
                   "query_string": changelist.get_query_string({self.parameter_name: key})}

    def queryset(self, request, queryset):
        return windows_in(queryset, self.value())


def installation_latency_link(installation) -> str:
    """The latency page filtered to one installation (its account and plugin) over the last hour."""
    query = urlencode({"account__id__exact": installation.account_id, "plugin_slug": installation.plugin.slug,
                       "range": "hour"})
    return format_html('<a href="{}?{}">calls, percentiles and failures</a>',
                       reverse("admin:plugins_app_latencyhistogram_changelist"), query)


def _ms(value) -> str:
    return "—" if value is None else f"{value:,.2f} ms"


@admin.register(LatencyHistogram)
class LatencyHistogramAdmin(ReadOnlyAccountScopedAdmin):
    list_display = ["start", "plugin_slug", "hook", "runs", "p50", "p95", "p99", "max", "failed", "account"]
    list_filter = [RangeFilter, ("plugin_slug", PluginSlugFilter), "hook", "account"]
    list_select_related = ["account"]
    fields = ("start", "resolution", "account", "plugin_slug", "hook", "runs", "p50", "p95", "p99", "max",
              "failed", "statuses")
    readonly_fields = fields
    change_list_template = "admin/plugins_app/latencyhistogram/change_list.html"

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, {"title": "Latency and failures", **(extra_context or {})})
        changelist = getattr(response, "context_data", {}).get("cl")
        if changelist is not None:
            response.context_data["report"] = report(changelist.queryset, _range_of(request))
        return response

    @admin.display(description="p50")
    def p50(self, obj):
        return _ms(Window.of(obj).percentile(0.50))

    @admin.display(description="p95")
    def p95(self, obj):
        return _ms(Window.of(obj).percentile(0.95))

    @admin.display(description="p99")
    def p99(self, obj):
        return _ms(Window.of(obj).percentile(0.99))

    @admin.display(description="max", ordering="max_ms")
    def max(self, obj):
        return _ms(obj.max_ms)

    @admin.display(description="failed")
    def failed(self, obj):
        return f"{failure_rate(Window.of(obj)):g} %"

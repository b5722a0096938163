"""Recorded calls in the admin: what checks run versions against, read by account admins and auditors."""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.html import format_html

from plugins_app.admin.filters import DateRangeFilter
from plugins_app.admin.scoping import ReadOnlyAccountScopedAdmin
from plugins_app.models import RecordedCall


@admin.register(RecordedCall)
class RecordedCallAdmin(ReadOnlyAccountScopedAdmin):
    list_display = ["created_at", "hook", "outcome", "cancelled_by", "account"]
    list_filter = ["hook", "outcome", ("created_at", DateRangeFilter), "account"]
    list_select_related = ["account"]
    fields = ("created_at", "account", "hook", "hop", "turn_id", "outcome", "cancelled_by", "reason", "versions",
              "context_snapshot", "value_snapshot")
    readonly_fields = fields

    @admin.display(description="context (secret values redacted)")
    def context_snapshot(self, obj):
        return format_html('<pre class="hub-code">{}</pre>', json.dumps(obj.context, indent=2, ensure_ascii=False))

    @admin.display(description="value after the chain")
    def value_snapshot(self, obj):
        return format_html('<pre class="hub-code">{}</pre>', json.dumps(obj.value, indent=2, ensure_ascii=False))

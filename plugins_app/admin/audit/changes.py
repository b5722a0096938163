"""The account change log in the admin: read by account admins and auditors, filtered, never edited."""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.html import format_html

from plugins_app.admin.filters import DateRangeFilter, ExactTextFilter, PluginSlugFilter
from plugins_app.admin.scoping import ReadOnlyAccountScopedAdmin
from plugins_app.admin.versions.diff import diff_html
from plugins_app.models import AccountChange


def _json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@admin.register(AccountChange)
class AccountChangeAdmin(ReadOnlyAccountScopedAdmin):
    count_names = ("change", "changes")   # the model's plural, "change log", names the whole list
    list_display = ["created_at", "actor_name", "action", "plugin_slug", "summary", "account"]
    list_filter = ["action", ("plugin_slug", PluginSlugFilter), ("created_at", DateRangeFilter),
                   ("actor_name", ExactTextFilter), "account"]
    list_select_related = ["account"]
    search_fields = ["summary"]
    search_help_text = "Search in the summaries."
    fields = ("created_at", "account", "actor_name", "action", "plugin_slug", "installation_id", "summary",
              "before_value", "after_value", "before_after")
    readonly_fields = fields

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Change log", **(extra_context or {})})

    @admin.display(description="before")
    def before_value(self, obj):
        return format_html('<pre class="hub-code">{}</pre>', _json(obj.before))

    @admin.display(description="after")
    def after_value(self, obj):
        return format_html('<pre class="hub-code">{}</pre>', _json(obj.after))

    @admin.display(description="before → after")
    def before_after(self, obj):
        return format_html('<pre class="hub-code hub-diff">{}</pre>', diff_html(_json(obj.before), _json(obj.after)))

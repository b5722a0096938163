"""Read-only admin for SSH turns: each server's sshConnectionOpening verdict per session and turn."""

import json

from django.contrib import admin
from django.utils.html import format_html

from plugins_app.admin.filters import DateRangeFilter, ExactTextFilter
from plugins_app.admin.scoping import ReadOnlyAccountScopedAdmin
from plugins_app.models import SshTurn


@admin.register(SshTurn)
class SshTurnAdmin(ReadOnlyAccountScopedAdmin):
    account_field = "ssh_host__account"
    auditor_visible = False
    list_display = ["created_at", "ssh_host", "session_id", "turn_id", "state"]
    list_filter = ["state", ("created_at", DateRangeFilter), ("session_id", ExactTextFilter), "ssh_host"]
    list_select_related = ["ssh_host"]
    fields = ("ssh_host", "session_id", "turn_id", "state", "refusal", "created_at", "updated_at")
    readonly_fields = fields

    @admin.display(description="refusal")
    def refusal(self, obj):
        if not obj.cancellation:
            return "—"
        return format_html('<pre class="hub-code">{}</pre>', json.dumps(obj.cancellation, indent=2, ensure_ascii=False))

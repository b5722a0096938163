"""The admin's view of host.kv: an installation's keys with values (a secret's value redacted), sizes and
expiry; account admins delete keys or clear an installation's store (both in the change log), auditors
only look."""

import json

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from plugins_app.models import KvEntry
from plugins_app.services.kv import browse, checks

from .filters import PluginSlugFilter
from .scoping import AccountScopedAdmin, per_object_action, permitted_rows

PREVIEW_CHARS = 200


@admin.register(KvEntry)
class KvEntryAdmin(AccountScopedAdmin):
    list_display = ["key", "plugin", "shown_value", "size", "expires_at", "updated_at"]
    list_filter = [("installation__plugin__slug", PluginSlugFilter), "account"]
    list_select_related = ["installation__plugin", "account"]
    search_fields = ["key"]
    fields = ("account", "installation", "key", "shown_value", "size", "expires_at", "updated_at")
    readonly_fields = fields
    actions = ["clear_stores"]

    @admin.display(description="plugin", ordering="installation__plugin__slug")
    def plugin(self, obj: KvEntry) -> str:
        return obj.installation.plugin.slug

    @admin.display(description="value")
    def shown_value(self, obj: KvEntry) -> str:
        value = browse.account_redactor(obj.account_id).data(checks.decoded(obj.value, obj.number))
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"

    def get_queryset(self, request: HttpRequest) -> QuerySet[KvEntry]:
        # Expired keys are gone for plugins already; beat's sweep deletes them.
        now = timezone.now()
        return super().get_queryset(request).exclude(expires_at__lte=now)

    def has_add_permission(self, request: HttpRequest, *args) -> bool:
        return False   # plugins write keys; people read and delete them

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: KvEntry) -> None:
        browse.delete_key(obj.account, obj.installation_id, obj.key)

    @transaction.atomic
    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[KvEntry]) -> None:
        rows, _ = permitted_rows(self, request, queryset, "delete")   # not an audited account's keys
        for entry in rows.select_related("account"):
            browse.delete_key(entry.account, entry.installation_id, entry.key)

    @per_object_action("delete", description="Clear the whole store of the selected keys' installations")
    def clear_stores(self, request: HttpRequest, queryset: QuerySet[KvEntry]) -> None:
        cleared = 0
        for installation_id in set(queryset.values_list("installation_id", flat=True)):
            entry = queryset.filter(installation_id=installation_id).select_related("account").first()
            if entry is not None:
                cleared += browse.clear(entry.account, installation_id)
        self.message_user(request, f"Deleted {cleared} keys.", messages.SUCCESS)

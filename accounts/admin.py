"""Django admin for accounts, their API keys and memberships, scoped to the user's accounts."""
from django.contrib import admin, messages
from django.utils.html import format_html

from plugins_app.admin.scoping import AccountScopedAdmin, is_operator

from .models import Account, ApiKey, Membership


@admin.register(Account)
class AccountAdmin(AccountScopedAdmin):
    account_field = "pk"
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    readonly_fields = ["hooks_version", "created_at"]

    def has_add_permission(self, request):
        return is_operator(request) and super().has_add_permission(request)

    def has_delete_permission(self, request, obj=None):
        return is_operator(request) and super().has_delete_permission(request, obj)


@admin.register(ApiKey)
class ApiKeyAdmin(AccountScopedAdmin):
    auditor_visible = False
    list_display = ["account", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["account"]
    search_fields = ["name", "prefix", "account__name"]
    autocomplete_fields = ["account"]
    readonly_fields = ["prefix", "hashed", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke_selected"]

    def get_readonly_fields(self, request, obj=None):
        # A key stays with the account it was issued for.
        if obj is not None:
            return ["account", *self.readonly_fields]
        return self.readonly_fields

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["account", "name"]
        return ["account", "name", *self.readonly_fields]

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        # The admin keeps using `obj` after this call, so it is saved in place
        # with the same generation ApiKey.issue() uses.
        raw_key = obj.save_with_new_secret()
        messages.success(
            request,
            format_html(
                "API key for {}: <code>{}</code> — copy it now, it will not be shown again.",
                obj.account,
                raw_key,
            ),
        )

    @admin.action(description="Revoke selected keys")
    def revoke_selected(self, request, queryset):
        revoked = queryset.revoke()
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)


@admin.register(Membership)
class MembershipAdmin(AccountScopedAdmin):
    auditor_visible = False
    list_display = ["user", "account", "role", "created_at"]
    list_filter = ["role"]
    list_select_related = ["user", "account"]
    search_fields = ["user__username", "account__name"]
    autocomplete_fields = ["user", "account"]

"""Django admin for accounts, their API keys and memberships, scoped to the user's accounts.

It lives with the hub's other admin pages (and their per-account scoping) so that the accounts app
imports nothing from plugins_app: plugins_app depends on accounts, never the reverse."""
from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from accounts.models import Account, ApiKey, Membership
from accounts.services import users_addable_by

from .scoping import AccountScopedAdmin, admin_account_ids, is_operator, per_object_action


@admin.register(Account)
class AccountAdmin(AccountScopedAdmin):
    account_field = "pk"
    auditor_visible = False
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

    @per_object_action("change", description="Revoke selected keys")
    def revoke_selected(self, request, queryset):
        revoked = queryset.revoke()
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)


class MemberForm(forms.ModelForm):
    """For account admins, who must not browse (or probe) the hub's users: a member is named by
    username, and only a member of another account this admin administers can be added. Anyone
    else is added by an operator (`manage.py add_member`)."""

    username = forms.CharField(max_length=150, help_text="A member of another account you administer.")
    admin_account_ids: frozenset = frozenset()   # set per request by MembershipAdmin.get_form

    class Meta:
        model = Membership
        fields = ["account", "username", "role"]

    def clean_username(self):
        username = self.cleaned_data["username"].strip()
        user = users_addable_by(self.admin_account_ids).filter(username=username).first()
        if user is None:
            # One answer for a name that does not exist and one that may not be added: no oracle.
            raise forms.ValidationError(f"there is no user {username!r} you can add: you can add members of "
                                        "your other accounts; an operator adds anyone else with "
                                        "manage.py add_member")
        self.instance.user = user
        return username

    def validate_unique(self):
        # The user is set in clean_username, after the model form decided which fields to check.
        super().validate_unique()
        if self.instance.user_id and Membership.objects.filter(
                user=self.instance.user, account=self.cleaned_data.get("account")).exists():
            self.add_error("username", "this user is already a member of the account; change their role instead")


@admin.register(Membership)
class MembershipAdmin(AccountScopedAdmin):
    auditor_visible = False
    list_display = ["user", "account", "role", "created_at"]
    list_filter = ["role", "account"]
    list_select_related = ["user", "account"]
    search_fields = ["user__username", "account__name"]

    def get_autocomplete_fields(self, request):
        return ["user", "account"] if is_operator(request) else []

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None and not is_operator(request):
            kwargs["form"] = type("MemberForm", (MemberForm,),
                                  {"admin_account_ids": frozenset(admin_account_ids(request))})
            kwargs["fields"] = ["account", "username", "role"]
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None and not is_operator(request):
            return ["account", "username", "role"]
        return ["user", "account", "role"]

    def get_readonly_fields(self, request, obj=None):
        return ["user", "account"] if obj is not None else []

    def _is_own(self, request, obj):
        return obj is not None and obj.user_id == request.user.pk and not is_operator(request)

    def has_change_permission(self, request, obj=None):
        # An account admin can't demote or remove themselves (and lock the account out).
        return not self._is_own(request, obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return not self._is_own(request, obj) and super().has_delete_permission(request, obj)

"""Admin pages of the host surface: the platform bridge, plugin logs, agents and their workspaces."""

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from plugins_app.errors import InvalidInput
from plugins_app.models import Agent, Installation, PlatformConfig, Plugin, PluginLog, WorkspaceFile
from plugins_app.services.host import agents, platform

from .filters import PluginSlugFilter, plugin_column
from .scoping import AccountScopedAdmin, ReadOnlyAccountScopedAdmin, admin_account_ids, is_operator


def _message(exc: InvalidInput) -> str:
    return str(exc.detail).split(": ", 1)[-1]


class PlatformConfigForm(forms.ModelForm):
    base_url = forms.CharField(max_length=500, help_text="e.g. https://platform.example.com/hub")
    signing_secret = forms.CharField(
        required=False, strip=False, widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Write-only: never shown again. Leave empty to keep the stored secret.")

    class Meta:
        model = PlatformConfig
        fields = ["account", "base_url", "signing_secret"]

    def clean_base_url(self):
        try:
            return platform.check_base_url(self.cleaned_data.get("base_url"))
        except InvalidInput as exc:
            raise ValidationError(_message(exc)) from None

    def clean_signing_secret(self):
        secret = self.cleaned_data.get("signing_secret") or ""
        if not secret and self.instance.pk:
            secret = self.instance.signing_secret   # empty keeps the stored one
        try:
            return platform.check_secret(secret)
        except InvalidInput as exc:
            raise ValidationError(_message(exc)) from None


@admin.register(PlatformConfig)
class PlatformConfigAdmin(AccountScopedAdmin):
    form = PlatformConfigForm
    list_display = ["account", "base_url", "has_secret", "updated_at"]
    list_select_related = ["account"]
    readonly_fields = ["has_secret", "updated_at"]
    auditor_visible = False

    @admin.display(boolean=True, description="secret set")
    def has_secret(self, obj):
        return obj.has_secret

    def get_readonly_fields(self, request, obj=None):
        return ["account", *self.readonly_fields] if obj is not None else self.readonly_fields


@admin.register(PluginLog)
class PluginLogAdmin(ReadOnlyAccountScopedAdmin):
    list_display = ["created_at", "level", plugin_column, "hook", "message", "account"]
    list_filter = ["level", "hook", ("plugin_slug", PluginSlugFilter), "account"]
    list_select_related = ["account"]
    search_fields = ["message"]
    fields = ("created_at", "account", "plugin_slug", "installation_id", "hook", "level", "message")
    readonly_fields = fields


class AgentForm(forms.ModelForm):
    class Meta:
        model = Agent
        fields = ["account", "agent_id", "name", "plugin"]

    def clean_agent_id(self):
        try:
            return agents.check_agent_id(self.cleaned_data.get("agent_id"))
        except InvalidInput as exc:
            raise ValidationError(_message(exc)) from None

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        account = cleaned.get("account") or getattr(self.instance, "account", None)
        plugin = cleaned.get("plugin")
        if account is not None and plugin is not None and not Installation.objects.filter(
                account=account, plugin=plugin).exists():
            raise ValidationError({"plugin": f"{plugin.slug} is not installed in {account}."})
        return cleaned


@admin.register(Agent)
class AgentAdmin(AccountScopedAdmin):
    auditor_visible = False   # configuration, not audit trail
    form = AgentForm
    list_display = ["name", "agent_id", "plugin", "account", "updated_at"]
    list_filter = ["plugin", "account"]
    list_select_related = ["account", "plugin"]
    search_fields = ["name", "agent_id"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        formfield = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.name == "plugin" and formfield is not None:
            # Official plugins belong to no account: offer what the user's accounts have installed.
            installed = Plugin.objects.all() if is_operator(request) else Plugin.objects.filter(
                installations__account__in=admin_account_ids(request))
            formfield.queryset = installed.distinct()
        return formfield


@admin.register(WorkspaceFile)
class WorkspaceFileAdmin(AccountScopedAdmin):
    """Files plugins wrote with host.workspace: viewed and removed here, written only by plugins."""
    auditor_visible = False   # configuration, not audit trail

    list_display = ["agent_id", "path", "size", "updated_at", "account"]
    list_filter = ["account"]
    list_select_related = ["account"]
    search_fields = ["agent_id", "path"]
    fields = ("account", "agent_id", "path", "size", "updated_at", "content")
    readonly_fields = fields

    def has_add_permission(self, request, *args):
        return False

    def has_change_permission(self, request, obj=None):
        return False

"""Admin pages for SSH hosts: the private key is write-only and never rendered back."""

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from plugins_app.admin.scoping import AccountScopedAdmin
from plugins_app.errors import InvalidInput
from plugins_app.models import SshHost
from plugins_app.services.ssh import hosts as ssh_hosts

FORM_FIELDS = {api: attr.removesuffix("_id") for attr, api in ssh_hosts.API_NAMES.items()}


class SecretTextarea(forms.Textarea):
    """Never renders a value, not even the one just submitted with a form that had errors."""

    def format_value(self, value):
        return None


class SshHostForm(forms.ModelForm):
    private_key = forms.CharField(
        required=False, strip=False, widget=SecretTextarea(attrs={"rows": 6, "autocomplete": "off"}),
        help_text="Write-only: stored encrypted and never shown again. Leave empty to keep the stored key.")

    class Meta:
        model = SshHost
        fields = ["account", "display_name", "connection_type", "hostname", "port", "jump_host", "tunnel_port",
                  "username", "private_key", "host_key"]
        widgets = {"host_key": forms.Textarea(attrs={"rows": 3})}

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if self.errors:
            return cleaned
        creating = self.instance.pk is None
        if creating and not cleaned.get("private_key"):
            raise ValidationError({"private_key": "A new host needs its private key."})
        data = {name: cleaned.get(name) for name in ("display_name", "connection_type", "hostname", "port",
                                                     "tunnel_port", "username", "host_key")}
        data["jump_host_id"] = cleaned["jump_host"].pk if cleaned.get("jump_host") else None
        if cleaned.get("private_key"):
            data["private_key"] = cleaned["private_key"]
        if creating and data["connection_type"] == SshHost.ConnectionType.TUNNEL and data["tunnel_port"] is None:
            del data["tunnel_port"]   # the service's default applies
        if "account" in cleaned:   # read-only (so absent) once the host exists
            self.instance.account = cleaned["account"]
        try:
            ssh_hosts.prepare(self.instance, data, creating=creating)
        except InvalidInput as exc:
            field = FORM_FIELDS.get(exc.extra["field"])
            message = str(exc.detail).split(": ", 1)[-1]
            raise ValidationError({field: message} if field in self.fields else message) from None
        # The model form copies cleaned values onto the instance next: hand it the normalized ones.
        cleaned.update(host_key=self.instance.host_key, tunnel_port=self.instance.tunnel_port,
                       jump_host=self.instance.jump_host)
        return cleaned


@admin.register(SshHost)
class SshHostAdmin(AccountScopedAdmin):
    auditor_visible = False   # configuration, not audit trail
    form = SshHostForm
    list_display = ["display_name", "account", "connection_type", "username", "hostname", "port", "jump_host",
                    "host_key_fingerprint"]
    list_filter = ["connection_type", "account"]
    list_select_related = ["account", "jump_host"]
    search_fields = ["display_name", "hostname", "username"]
    readonly_fields = ["host_key_fingerprint", "public_key", "created_at", "updated_at"]

    def get_fields(self, request, obj=None):
        fields = list(SshHostForm.Meta.fields)
        return fields if obj is None else fields + self.readonly_fields

    def get_readonly_fields(self, request, obj=None):
        # A host stays with the account it was created in.
        return ["account", *self.readonly_fields] if obj is not None else self.readonly_fields

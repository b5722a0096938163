"""The Secrets page: a password-style field that is never rendered back; admins set, auditors see names."""

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import transaction

from plugins_app.admin.scoping import AccountScopedAdmin
from plugins_app.errors import HubError
from plugins_app.models import Secret
from plugins_app.services.secrets import store

# The service's field names, as the form calls them.
FORM_FIELDS = {"name": "name", "value": "new_value", "allowedHosts": "allowed_hosts", "description": "description"}


HOSTS_HELP = ("One per line: api.example.com, an address, or *.example.com for its subdomains. Each binds a scheme "
              "and a port: a bare host is https on port 443 only; write api.example.com:8443 for another port, or "
              "http://127.0.0.1:8080 for plain http (http://host alone is port 80). host.fetch sends the value "
              "to these only.")


class HostsField(forms.CharField):
    """allowedHosts as text: one host per line (or comma-separated)."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value):
        text = super().to_python(value) or ""
        return [h.strip() for h in text.replace(",", "\n").splitlines() if h.strip()]


class SecretForm(forms.ModelForm):
    # Not called `value`: the model's value() decrypts, and a view-only page looks names up on the object.
    new_value = forms.CharField(
        label="Value", required=False, strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: stored encrypted and never shown again. Leave empty to keep the stored value.")
    allowed_hosts = HostsField(help_text=HOSTS_HELP)

    class Meta:
        model = Secret
        fields = ["account", "name", "new_value", "allowed_hosts", "description"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if self.errors:
            return cleaned
        creating = self.instance.pk is None
        try:
            store.check_name(cleaned.get("name") if creating else self.instance.name)
            if cleaned.get("new_value"):
                store.check_value(cleaned["new_value"])
            elif creating:
                raise ValidationError({"new_value": "A new secret needs its value."})
            store.check_hosts(cleaned.get("allowed_hosts"))
            store.check_description(cleaned.get("description"))
        except HubError as exc:
            field = FORM_FIELDS.get(exc.extra.get("field", ""))
            message = str(exc.detail).split(": ", 1)[-1]
            raise ValidationError({field: message} if field in self.fields else message) from None
        if creating and store.list_secrets(cleaned["account"]).filter(name=cleaned["name"]).exists():
            raise ValidationError({"name": "This account already has a secret with this name."})
        return cleaned


@admin.register(Secret)
class SecretAdmin(AccountScopedAdmin):
    form = SecretForm
    list_display = ["name", "account", "state", "hosts", "set_by", "updated_at"]
    list_filter = ["account"]
    list_select_related = ["account"]
    search_fields = ["name", "description"]
    readonly_fields = ["state", "set_by", "created_at", "updated_at"]

    def get_fields(self, request, obj=None):
        fields = list(SecretForm.Meta.fields)
        return fields if obj is None else fields + self.readonly_fields

    def get_readonly_fields(self, request, obj=None):
        # A secret keeps its account and name; change its value, hosts or description.
        return ["account", "name", *self.readonly_fields] if obj is not None else self.readonly_fields

    @admin.display(description="value")
    def state(self, obj):
        return f"set, updated {obj.updated_at:%Y-%m-%d %H:%M} UTC" if obj.pk else "—"

    @admin.display(description="allowed hosts")
    def hosts(self, obj):
        return ", ".join(obj.allowed_hosts)

    def save_model(self, request, obj, form, change):
        # Through the service, so the change log records it (without the value).
        data = form.cleaned_data
        account = obj.account
        saved, _ = store.set_secret(account, obj.name, value=data.get("new_value") or None,
                                    allowed_hosts=data["allowed_hosts"], description=data.get("description") or "")
        obj.pk, obj.value_encrypted, obj.set_by = saved.pk, saved.value_encrypted, saved.set_by
        obj.created_at, obj.updated_at = saved.created_at, saved.updated_at

    def delete_model(self, request, obj):
        store.delete_secret(obj.account, obj.name)

    @transaction.atomic
    def delete_queryset(self, request, queryset):
        for secret in queryset.select_related("account"):
            store.delete_secret(secret.account, secret.name)

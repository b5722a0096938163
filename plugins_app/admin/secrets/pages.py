"""The Secrets page: a password-style field that is never rendered back; admins set, auditors see names."""

from datetime import UTC
from typing import Any

from django import forms
from django.contrib import admin
from django.db import transaction
from django.http import QueryDict
from django.urls import reverse
from django.utils.html import format_html_join

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
    """allowedHosts as text: one host per line (or comma-separated). Each entry keeps the line it was
    written on, so an error names "line 3" as the admin sees it, not the array's index."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value):
        return [host for host, _ in self.entries(value)]

    def entries(self, value) -> list[tuple[str, str]]:
        text = super().to_python(value) or ""
        return [(host.strip(), f"line {number}") for number, line in enumerate(text.splitlines(), 1)
                for host in line.split(",") if host.strip()]


def _when(moment) -> str:
    """The page's one date format (the list and the detail write it the same)."""
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if moment else "—"


class SecretForm(forms.ModelForm):
    # Not called `value`: the model's value() decrypts, and a view-only page looks names up on the object.
    # render_value: what the admin just typed stays in the field when another field is refused; a value
    # that was itself refused is cleared (see clean), and a stored value is never an initial to render.
    new_value = forms.CharField(
        label="Value", required=False, strip=False,
        widget=forms.PasswordInput(render_value=True, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: stored encrypted and never shown again. Leave empty to keep the stored value.")
    # The model's RegexValidator would answer "Enter a valid value."; the service's check says what a name is.
    name = forms.CharField(max_length=64, help_text=Secret._meta.get_field("name").help_text)
    allowed_hosts = HostsField(help_text=HOSTS_HELP)

    class Meta:
        model = Secret
        fields = ["account", "name", "new_value", "allowed_hosts", "description"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        account = self.fields.get("account")
        if self.instance.pk is None and isinstance(account, forms.ModelChoiceField):
            accounts = account.queryset   # narrowed to the user's accounts by the admin
            if accounts is not None and accounts.count() == 1 and (only := accounts.first()) is not None:
                account.initial = only.pk

    def clean(self) -> dict[str, Any]:
        """Every field is checked, so every problem shows at once (not one per submit)."""
        super().clean()
        cleaned = self.cleaned_data
        creating = self.instance.pk is None
        hosts_field = self.fields["allowed_hosts"]
        assert isinstance(hosts_field, HostsField)
        places = [place for _, place in hosts_field.entries(self.data.get(self.add_prefix("allowed_hosts")))]
        checks = [
            ("name", lambda: store.check_name(cleaned["name"]) if creating else None, creating),
            ("new_value", lambda: store.check_value(cleaned["new_value"]), bool(cleaned.get("new_value"))),
            ("allowed_hosts", lambda: store.check_hosts(cleaned["allowed_hosts"], places), True),
            ("description", lambda: store.check_description(cleaned.get("description")), True),
        ]
        for field, check, applies in checks:
            if applies and field in cleaned:
                self._check(field, check)
        if creating and not cleaned.get("new_value") and "new_value" not in self.errors:
            self.add_error("new_value", "A new secret needs its value.")
        if (creating and "name" in cleaned and "account" in cleaned
                and store.list_secrets(cleaned["account"]).filter(name=cleaned["name"]).exists()):
            self.add_error("name", "This account already has a secret with this name.")
        if "new_value" in self.errors and isinstance(self.data, QueryDict):
            data = self.data.copy()
            data[self.add_prefix("new_value")] = ""   # a refused value is not sent back
            self.data = data
        return cleaned

    def _check(self, field: str, check) -> None:
        try:
            check()
        except HubError as exc:
            target = FORM_FIELDS.get(exc.extra.get("field", ""), field)
            self.add_error(target if target in self.fields else None, str(exc.detail).split(": ", 1)[-1])


@admin.register(Secret)
class SecretAdmin(AccountScopedAdmin):
    form = SecretForm
    list_display = ["name", "account", "state", "hosts", "granted", "set_by", "updated"]
    list_filter = ["account"]
    list_select_related = ["account"]
    search_fields = ["name", "description"]
    readonly_fields = ["state", "granted", "set_by", "created", "updated"]

    def get_fields(self, request, obj=None):
        fields = list(SecretForm.Meta.fields)
        return fields if obj is None else fields + self.readonly_fields

    def get_readonly_fields(self, request, obj=None):
        # A secret keeps its account and name; change its value, hosts or description.
        return ["account", "name", *self.readonly_fields] if obj is not None else self.readonly_fields

    @admin.display(description="value")
    def state(self, obj):
        return f"set, updated {_when(obj.updated_at)}" if obj.pk else "—"

    @admin.display(description="created")
    def created(self, obj):
        return _when(obj.created_at)

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, obj):
        return _when(obj.updated_at)

    @admin.display(description="granted to")
    def granted(self, obj):
        """The installations that may put this value in a request (they hold secret:NAME)."""
        if obj.pk is None:
            return "—"
        rows = [(reverse("admin:plugins_app_installation_change", args=[i.pk]), i.plugin.name)
                for i in store.granted_to(obj)]
        return format_html_join(", ", '<a href="{}">{}</a>', rows) if rows else "no installation"

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

"""Admin forms: installing from source, changing an installation, and the try-it page."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django import forms
from django.http import QueryDict

from accounts.models import Account
from plugins_app.admin.plugins.grants import GRANT_HELP, GRANT_LABEL, grant_choices
from plugins_app.admin.plugins.settings_form import PrettyJSONField, SchemaSettingsMixin  # noqa: F401  (PrettyJSONField re-exported)
from plugins_app.admin.scoping import editable_accounts
from plugins_app.errors import InvalidInput
from plugins_app.models import Installation, Plugin
from plugins_app.runtime.tables.hooks import (
    BOOLEAN,
    HOOK_NAMES,
    HOOKS,
    ID,
    ID_LIST,
    INTEGER,
    NUMBER,
    STRING,
    STRING_LIST,
)
from plugins_app.runtime.tables.permissions import ALL_PERMISSIONS, is_secret_permission
from plugins_app.services.execution.hook_samples import example_context
from plugins_app.services.plugins import admin_ops
from plugins_app.services.plugins.installations import MAX_SOURCE_CHARS

EXTENSIONS = {".ts": "typescript", ".mts": "typescript", ".js": "javascript", ".mjs": "javascript"}
PERMISSION_CHOICES = [(p, p) for p in ALL_PERMISSIONS]
MAX_UPLOAD_BYTES = MAX_SOURCE_CHARS * 4   # UTF-8; the character limit is checked when compiling


class GrantField(forms.MultipleChoiceField):
    """The install page's grants: the host permissions, and the secret:NAME ones the reviewed source
    asks for (the service checks each against what the code asks)."""

    def valid_value(self, value):
        return super().valid_value(value) or is_secret_permission(str(value))


def take_upload(form: forms.Form, data: dict) -> bool:
    """An uploaded file becomes `data`'s source (its extension sets the language); False when the
    upload was refused (the error is on the form)."""
    upload = data.get("upload")
    if not upload:
        return True
    if upload.size > MAX_UPLOAD_BYTES:
        form.add_error("upload", f"the file is over {MAX_UPLOAD_BYTES // 1024} KiB")
        return False
    try:
        data["source"] = upload.read().decode("utf-8")
    except UnicodeDecodeError:
        form.add_error("upload", "the file is not UTF-8 text")
        return False
    suffix = "." + upload.name.rsplit(".", 1)[-1].lower() if "." in upload.name else ""
    if suffix in EXTENSIONS:
        data["language"] = EXTENSIONS[suffix]
    return True


def typecheck_field() -> forms.BooleanField:
    return forms.BooleanField(
        required=False, initial=True, label="Check types",
        help_text="TypeScript is type-checked against the SDK (GET /api/v1/sdk/middleware.d.ts), as tsc would "
                  "with docs/plugin-example's tsconfig: a type error is marked at its line and refuses the "
                  "source. JavaScript is only parsed.")


def source_digest(source: str, language: str) -> str:
    """What the admin reviewed: a new source or language needs a new review before installing."""
    return hashlib.sha256(f"{language}\0{source}".encode()).hexdigest()


class AccountChoiceMixin:
    fields: dict[str, forms.Field]   # the Form this is mixed into has them

    def limit_accounts(self, request):
        field = self.fields["account"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = accounts = editable_accounts(request)
        if accounts.count() == 1 and (only := accounts.first()) is not None:
            field.initial = only.pk


class InstallForm(AccountChoiceMixin, forms.Form):
    account: forms.ModelChoiceField[Account] = forms.ModelChoiceField(queryset=None)
    name = forms.CharField(max_length=100)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    language = forms.ChoiceField(choices=Plugin.Language.choices, initial=Plugin.Language.TYPESCRIPT)
    source = forms.CharField(
        required=False, strip=False,
        widget=forms.Textarea(attrs={"rows": 18, "cols": 100, "spellcheck": "false", "class": "hub-code",
                                     "data-hub-editor": "source"}))
    upload = forms.FileField(required=False, label="…or upload a file",
                             help_text="A .ts or .js file; it replaces the pasted source and sets the language.")
    typecheck = typecheck_field()
    # The help is given here: a bound field copies it when first built, before show_compiled runs.
    grant = GrantField(choices=PERMISSION_CHOICES, required=False, widget=forms.CheckboxSelectMultiple,
                       label=GRANT_LABEL, help_text=GRANT_HELP)
    reviewed = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, request, **kwargs):
        super().__init__(*args, **kwargs)
        self.limit_accounts(request)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if not take_upload(self, data):
            return data
        if not (data.get("source") or "").strip():
            self.add_error("source", "paste the plugin's source or upload a file")
        return data

    @property
    def digest(self) -> str:
        return source_digest(self.cleaned_data["source"], self.cleaned_data["language"])

    def was_reviewed(self) -> bool:
        return self.cleaned_data.get("reviewed") == self.digest

    def _keep_source(self) -> QueryDict:
        """An uploaded file is shown as pasted text from now on; returns the form's data, now a mutable copy."""
        assert isinstance(self.data, QueryDict)   # a bound form of the install page: request.POST
        data = self.data.copy()
        data["source"] = self.cleaned_data["source"]
        data["language"] = self.cleaned_data["language"]
        self.data = data
        return data

    def show_compiled(self, compiled: dict) -> None:
        """Re-render for review: the permissions it asks for become the only grant choices, each naming
        the calls that need it. The first review ticks them all (installing is the consent, as an app
        store's install screen is); a later one keeps what the admin left ticked."""
        data = self._keep_source()
        if not self.cleaned_data.get("reviewed"):
            data.setlist("grant", list(compiled["permissions"]))
        data["reviewed"] = self.digest
        grant = self.fields["grant"]
        assert isinstance(grant, forms.MultipleChoiceField)
        grant.choices = grant_choices(compiled["permissions"], compiled["host_members"])

    def add_compile_errors(self, errors: list[dict]) -> None:
        self._keep_source()
        source_lines = self.cleaned_data["source"].splitlines()
        self.compile_errors = []
        for error in errors:
            line, column = error.get("line") or 1, error.get("column") or 1
            self.add_error("source", f"line {line}, column {column}: {error['message']}")
            text = source_lines[line - 1] if 0 < line <= len(source_lines) else ""
            gutter = f"{line} | "
            # Keep the source's tabs so the caret lines up under the column.
            pad = "".join(c if c == "\t" else " " for c in text[:column - 1]).ljust(column - 1)
            excerpt = f"{gutter}{text}\n{' ' * len(gutter)}{pad}^"
            self.compile_errors.append({"line": line, "column": column, "message": error["message"],
                                        "excerpt": excerpt})
        # The editor marks each error at its place.
        self.fields["source"].widget.attrs["data-errors"] = json.dumps(
            [{k: e[k] for k in ("line", "column", "message")} for e in self.compile_errors])


class InstallationChangeForm(SchemaSettingsMixin, forms.ModelForm):
    granted_permissions = forms.MultipleChoiceField(choices=(), required=False,
                                                    widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = Installation
        fields = ["enabled", "granted_permissions"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        plugin = self.instance.plugin if self.instance.plugin_id else None
        asked = plugin.permissions if plugin else []
        assert isinstance(self.fields["granted_permissions"], forms.MultipleChoiceField)
        self.fields["granted_permissions"].choices = [(p, p) for p in asked]
        self.fields["granted_permissions"].help_text = (
            "What the plugin's code calls; ungranted calls reject the plugin's promise." if asked
            else "This plugin calls no host member that needs a permission.")
        if plugin is not None:
            self.add_settings_fields(plugin.settings_schema, admin_ops.editable_settings(self.instance),
                                     "A JSON object handed to the plugin as host.config; a setting left out "
                                     "goes back to its default.")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        data["settings"] = self.settings_value()
        try:
            admin_ops.check_settings(self.instance, data["settings"])
        except InvalidInput as exc:
            self.add_settings_error(exc)
        return data


LONG_TEXT = {"systemPrompt", "text", "prompt", "content", "output", "errorOutput", "trailingText", "message",
             "command"}
CTX = "ctx_"
VERSION = "version_"


def _context_field(f) -> forms.Field:
    """A try-it input for one context field; a nullable one left empty is null, an optional one is left out."""
    blank_means = " Leave empty for null." if f.nullable else (" Leave empty to leave it out." if f.optional else "")
    common = {"label": f.name, "required": not (f.nullable or f.optional), "help_text": f"{f.describe()}.{blank_means}"}
    if f.type == BOOLEAN:
        return forms.BooleanField(**{**common, "required": False})
    if f.type == INTEGER:
        return forms.IntegerField(**common)
    if f.type == NUMBER:
        return forms.FloatField(**common)
    if f.choices:
        return forms.ChoiceField(choices=[("", "—")] * (not common["required"]) + [(c, c) for c in f.choices],
                                 **common)
    if f.type in (STRING_LIST, ID_LIST):
        common["help_text"] = f"{f.describe()}, one per line."
        return forms.CharField(required=False, strip=False, label=f.name, help_text=common["help_text"],
                               widget=forms.Textarea(attrs={"rows": 3}))
    if f.type == ID:
        return forms.RegexField(regex=r"^\d{1,20}$", error_messages={"invalid": "an id is a decimal number in a string"},
                                **common)
    if f.type == STRING and f.name in LONG_TEXT:
        return forms.CharField(strip=False, widget=forms.Textarea(attrs={"rows": 3, "cols": 80}), **common)
    return forms.CharField(strip=False, **common)


def _to_input(f, value):
    if f.type in (STRING_LIST, ID_LIST):
        return "\n".join(value or [])
    return "" if value is None else value


def _from_input(f, value):
    if f.type in (STRING_LIST, ID_LIST):
        return [line.strip() for line in (value or "").splitlines() if line.strip()]
    if value in (None, "") and f.type != BOOLEAN:
        return None if f.nullable else ""
    return value


class TryItForm(AccountChoiceMixin, forms.Form):
    """A field per context field of the chosen hook, or the whole context pasted as JSON."""

    account: forms.ModelChoiceField[Account] = forms.ModelChoiceField(queryset=None)
    hook = forms.ChoiceField(choices=[(name, name) for name in HOOK_NAMES])
    context = forms.CharField(required=False, strip=False, label="Or the whole context as JSON",
                              help_text="When filled, this object is sent instead of the fields above.",
                              widget=forms.Textarea(attrs={"rows": 10, "cols": 90, "spellcheck": "false",
                                                           "class": "hub-code"}))

    def __init__(self, *args, request, hook, **kwargs):
        super().__init__(*args, **kwargs)
        self.limit_accounts(request)
        self.spec = HOOKS[hook]
        example = example_context(hook)
        for f in self.spec.fields:
            field = _context_field(f)
            field.initial = _to_input(f, example.get(f.name))
            self.fields[CTX + f.name] = field
        if self.is_bound and (self.data.get("context") or "").strip():
            for f in self.spec.fields:
                self.fields[CTX + f.name].required = False
        self._add_version_fields()

    def _add_version_fields(self) -> None:
        """A choice of version for each of the account's installations that has more than one: the
        try-run swaps the chosen ones in for their live code."""
        field = self.fields["account"]
        assert isinstance(field, forms.ModelChoiceField)   # narrowed to the accounts this admin edits
        chosen = self.data.get("account") if self.is_bound else (self.initial.get("account") or field.initial)
        account_id = str(chosen or "")
        if not account_id.isdigit() or field.queryset is None:
            return
        account = field.queryset.filter(pk=int(account_id)).first()
        if account is None:
            return
        for installation in (Installation.objects.filter(account=account).select_related("plugin")
                             .prefetch_related("versions").order_by("pk")):
            numbers = sorted((v.number for v in installation.versions.all()), reverse=True)
            if len(numbers) < 2:
                continue
            live = installation.live_version
            self.fields[f"{VERSION}{installation.pk}"] = forms.TypedChoiceField(
                coerce=int, empty_value=None, required=False, label=installation.plugin.name,
                choices=[("", f"live (version {live})")] + [(n, f"version {n}") for n in numbers if n != live],
                help_text="Try a draft in this installation's place; nothing that runs changes.")

    def version_fields(self):
        return [self[name] for name in self.fields if name.startswith(VERSION)]

    def chosen_versions(self) -> dict[str, int]:
        """{installation id: version} for the versions chosen in place of live code."""
        return {name.removeprefix(VERSION): value for name, value in self.cleaned_data.items()
                if name.startswith(VERSION) and value is not None}

    def context_fields(self):
        return [self[CTX + f.name] for f in self.spec.fields]

    def uses_json(self) -> bool:
        return bool((self.cleaned_data.get("context") or "").strip())

    def context_value(self) -> dict:
        data = self.cleaned_data
        out = {}
        for f in self.spec.fields:
            value = _from_input(f, data.get(CTX + f.name))
            if f.optional and value in (None, ""):
                continue
            out[f.name] = value
        return out

    def add_context_error(self, exc) -> None:
        """Put a complaint about context.<name> next to that field (or on the JSON box)."""
        field = str(exc.extra.get("field", ""))
        name = field.split(".", 1)[1].split("[", 1)[0].split(".", 1)[0] if field.startswith("context.") else ""
        if not self.uses_json() and name and CTX + name in self.fields:
            self.add_error(CTX + name, str(exc.detail))
        else:
            self.add_error("context" if self.uses_json() else None, f"{field or 'context'}: {exc.detail}")


"""Settings forms built from a plugin's settings schema, with a JSON view kept for power users."""

from __future__ import annotations

import json
import zoneinfo
from typing import TYPE_CHECKING

from django import forms

from plugins_app.errors import InvalidInput
from plugins_app.services.plugins import settings as plugin_settings

PREFIX = "setting_"
FORM, JSON = "form", "json"
# What a required setting without a default shows as an example (never submitted for the user). "e.g."
# and the placeholder style (admin.css) keep it from reading as a value already filled in.
EXAMPLES = {"time": "e.g. 22:00", "timeZone": "Europe/Berlin", "regex": "e.g. sk-[A-Za-z0-9]{20,}",
            "secretName": "e.g. SLACK_TOKEN"}


class PrettyJSONField(forms.JSONField):
    """A JSON textarea that shows its value indented."""

    def prepare_value(self, value):
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


class TimeInput(forms.TextInput):
    """HH:MM as typed: a browser's time input would show its locale's 12-hour clock."""

    def __init__(self, attrs=None):
        super().__init__({"pattern": r"([01]\d|2[0-3]):[0-5]\d", "inputmode": "numeric", "size": 6,
                          "autocomplete": "off", **(attrs or {})})


def _zone_choices():
    return [(z, z) for z in sorted(zoneinfo.available_timezones() - plugin_settings.NOT_ZONES)]


def field_for(key: str, spec: dict) -> forms.Field:
    """One form field for one setting: its type, choices, bounds, default and help text."""
    kind, fmt = spec["type"], spec.get("format")
    help_text = spec.get("description", "")
    if "default" in spec:
        help_text += f" Default: {json.dumps(spec['default'], ensure_ascii=False)}."
    # The key as the plugin's code and the schema table write it, on every page: no capital, no colon.
    common = {"label": key, "label_suffix": "", "help_text": help_text.strip(), "required": spec.get("required", False)}
    if kind == "boolean":
        return forms.BooleanField(**{**common, "required": False})
    if kind == "integer":
        return forms.IntegerField(min_value=spec.get("minimum"), max_value=spec.get("maximum"), **common)
    if kind == "number":
        return forms.FloatField(min_value=spec.get("minimum"), max_value=spec.get("maximum"), **common)
    if kind == "enum":
        return forms.ChoiceField(choices=[(c, c) for c in spec["choices"]], **common)
    if kind == "string" and fmt == "time":
        return forms.CharField(widget=TimeInput(attrs={"placeholder": EXAMPLES["time"]}), **common)
    if kind == "string" and fmt == "timeZone":
        return forms.ChoiceField(choices=_zone_choices(), **common)
    if kind == "string" and fmt == "secretName":
        common["help_text"] = (f"{common['help_text']} The name of one of the account's secrets (Secrets page), "
                               "never the value itself.").strip()
        return forms.CharField(max_length=64, widget=forms.TextInput(attrs={"placeholder": EXAMPLES["secretName"]}), **common)
    if kind == "string":
        return forms.CharField(max_length=spec.get("maxLength", plugin_settings.MAX_STRING), strip=False, **common)
    if spec.get("choices"):
        return forms.MultipleChoiceField(choices=[(c, c) for c in spec["choices"]], widget=forms.CheckboxSelectMultiple,
                                         **common)
    common["help_text"] = f"{common['help_text']} One per line.".strip()
    placeholder = EXAMPLES["regex"] if fmt == "regex" else ""
    return forms.CharField(widget=forms.Textarea(attrs={"rows": 4, "class": "hub-code", "placeholder": placeholder}),
                           strip=False, **common)


def to_form(spec: dict, value):
    if spec["type"] == "string[]" and not spec.get("choices"):
        return "\n".join(value or [])
    return value


def from_form(spec: dict, value):
    if spec["type"] == "string[]" and not spec.get("choices"):
        return [line.strip() for line in (value or "").splitlines() if line.strip()]
    if spec["type"] == "string[]":
        return list(value or [])
    return value


if TYPE_CHECKING:
    _Form = forms.BaseForm   # what the mixin is mixed into, for the type checker
else:
    _Form = object


class SchemaSettingsMixin(_Form):
    """Adds a field per setting (named setting_<key>) and a JSON textarea; `settings_mode` says which
    one the person edited. Call add_settings_fields() in __init__ and settings_value() when clean."""

    settings_schema: dict = {}

    def add_settings_fields(self, schema: dict, values: dict, json_help: str = "") -> None:
        self.settings_schema = {k: s for k, s in schema.items() if k not in plugin_settings.computed_keys(schema)}
        mode = self.data.get(self.add_prefix("settings_mode")) if self.is_bound else FORM
        self.fields["settings_mode"] = forms.ChoiceField(choices=[(FORM, FORM), (JSON, JSON)], initial=FORM,
                                                         required=False, widget=forms.HiddenInput)
        for key, spec in self.settings_schema.items():
            field = field_for(key, spec)
            field.initial = to_form(spec, values.get(key))
            if mode == JSON:
                field.required = False
            self.fields[PREFIX + key] = field
        self.fields["settings_json"] = PrettyJSONField(
            required=False, initial=values, label="Settings as JSON",
            widget=forms.Textarea(attrs={"rows": 8, "class": "hub-code", "spellcheck": "false",
                                         "data-schema": json.dumps(self.settings_schema)}),
            help_text=json_help or "A JSON object; a setting left out goes back to its default.")

    def settings_fields(self):
        return [self[PREFIX + key] for key in self.settings_schema]

    def settings_value(self) -> dict:
        data = self.cleaned_data
        if data.get("settings_mode") == JSON or not self.settings_schema:
            value = data.get("settings_json")
            return {} if value in (None, "") else value
        return {key: from_form(spec, data.get(PREFIX + key)) for key, spec in self.settings_schema.items()
                if not (data.get(PREFIX + key) in (None, "") and not spec.get("required"))}

    def add_settings_error(self, exc: InvalidInput) -> None:
        """Put a service's complaint next to the setting it names (or on the JSON view)."""
        field = str(exc.extra.get("field", ""))
        key = field.split(".", 1)[1].split("[", 1)[0] if field.startswith("settings.") else ""
        json_mode = self.cleaned_data.get("settings_mode") == JSON
        target = PREFIX + key if key in self.settings_schema and not json_mode else "settings_json"
        # The service's message starts with the field it names ("settings.end: expected …"); beside the
        # setting that is said already, so only the part below the setting (an item's index) is kept.
        message = str(exc.detail).removeprefix(f"{field}: ")
        inner = field.removeprefix(f"settings.{key}") if key else ""
        if target == "settings_json" and key:
            message = f"{key}{inner}: {message}"
        elif inner:
            message = f"{inner.lstrip('.')}: {message}"
        self.add_error(target, message)

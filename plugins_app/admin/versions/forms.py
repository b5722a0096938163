"""The admin form that saves a draft version, written in the editor or uploaded."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from plugins_app.admin.plugins.forms import take_upload, typecheck_field
from plugins_app.models import Plugin


class DraftForm(forms.Form):
    language = forms.ChoiceField(choices=Plugin.Language.choices)
    source = forms.CharField(
        required=False, strip=False,
        widget=forms.Textarea(attrs={"rows": 14, "cols": 100, "spellcheck": "false", "class": "hub-code",
                                     "data-hub-editor": "draft"}))
    upload = forms.FileField(required=False, label="…or upload a file",
                             help_text="A .ts or .js file; it replaces the pasted source and sets the language.")
    note = forms.CharField(required=False, max_length=500, help_text="What changed, for the history.")
    typecheck = typecheck_field()

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if not take_upload(self, data):
            return data
        if not (data.get("source") or "").strip():
            self.add_error("source", "paste the new source or upload a file")
        return data

    def add_compile_errors(self, errors: list[dict]) -> None:
        marked = [{"line": e.get("line") or 1, "column": e.get("column") or 1, "message": e["message"]} for e in errors]
        for error in marked:
            self.add_error("source", f"line {error['line']}, column {error['column']}: {error['message']}")
        # The editor marks each error at its place.
        self.fields["source"].widget.attrs["data-errors"] = json.dumps(marked)

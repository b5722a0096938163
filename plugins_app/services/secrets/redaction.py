"""Replacing secret values with `[secret NAME]` in anything that leaves a chain run."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, quote_plus


def _forms(value: str) -> set[str]:
    """The value as it is likely to come back: as sent, JSON-escaped, percent-encoded."""
    return {value, json.dumps(value)[1:-1], quote(value, safe=""), quote_plus(value, safe="")}


class Redactor:
    """Knows some secret values and replaces each (in the usual encodings) with `[secret NAME]`.
    It never names a value, so a message built from it is safe to show."""

    def __init__(self) -> None:
        self._by_form: dict[str, str] = {}
        self._ordered: list[tuple[str, str]] = []

    def add(self, name: str, value: str) -> None:
        fresh = False
        for form in _forms(value):
            if form and form not in self._by_form:
                self._by_form[form] = f"[secret {name}]"
                fresh = True
        if fresh:   # longest first: one value inside another is replaced as the longer one
            self._ordered = sorted(self._by_form.items(), key=lambda kv: -len(kv[0]))

    def __bool__(self) -> bool:
        return bool(self._by_form)

    def text(self, text: str) -> str:
        for form, label in self._ordered:
            if form in text:
                text = text.replace(form, label)
        return text

    def data(self, value: Any) -> Any:
        """A copy of JSON-like `value` (dicts, lists, strings; keys too) with every value replaced."""
        if not self._ordered:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value

    def chain_result(self, result) -> None:
        """Scrub a runtime ChainResult in place: its context and value, the cancel reason, and each
        handler's warning, logs and traced value. The one defensive pass before anything is recorded."""
        if not self._ordered:
            return
        result.context = self.data(result.context)
        result.value = self.data(result.value)
        if result.cancellation is not None:
            result.cancellation.reason = self.text(result.cancellation.reason)
        for t in result.trace:
            t.warning = None if t.warning is None else self.text(t.warning)
            t.state_reset = None if t.state_reset is None else self.text(t.state_reset)
            t.logs = self.data(t.logs)
            t.value = self.data(t.value)

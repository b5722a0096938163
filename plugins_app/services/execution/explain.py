"""Explain: for a context, what each installation in a hook's chain would do, without running anything."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC

from django.utils import timezone

from plugins_app.errors import InvalidInput
from plugins_app.models import ChainEntry, Installation
from plugins_app.runtime.matching import words
from plugins_app.runtime.matching.evaluate import check
from plugins_app.runtime.tables.context import ContextError, validate_context
from plugins_app.services.execution import quarantine
from plugins_app.services.hooks import require_hook

# Why an installation in the chain would not run for this context (each has its `detail`).
DISABLED, QUARANTINED, SHADOW, MATCH = "disabled", "quarantined", "shadow", "match"


@dataclass
class Step:
    installation_id: str
    plugin: str
    position: int
    runs: bool
    reason: str | None = None          # disabled | quarantined | shadow | match, when it would not run
    detail: str | None = None          # the reason in words (for match: the condition that failed)
    matcher: str | None = None         # its matcher for this hook, in words ("runs when ...")
    not_granted: list[str] = field(default_factory=list)   # permissions its code asks for, not granted

    def as_dict(self) -> dict:
        return {"installationId": self.installation_id, "plugin": self.plugin, "position": self.position,
                "runs": self.runs, "reason": self.reason, "detail": self.detail, "matcher": self.matcher,
                "notGranted": self.not_granted}


def explain(account, hook: str, context) -> list[Step]:
    """Each installation in `hook`'s chain, in order (disabled ones included), with whether it would
    run for `context` and why not. The context is checked as execute checks it (400 naming the field)."""
    spec = require_hook(hook)
    try:
        clean = validate_context(spec, context)
    except ContextError as exc:
        raise InvalidInput(f"context.{exc.field}" if exc.field != "context" else "context", exc.message) from None
    entries = (ChainEntry.objects.filter(account=account, hook=hook).select_related("installation__plugin")
               .order_by("position", "id"))
    now = timezone.now()
    return [_step(entry.installation, entry.position, hook, clean, now) for entry in entries]


def _step(installation: Installation, position: int, hook: str, context: dict, now) -> Step:
    plugin = installation.plugin
    matcher = (plugin.matchers or {}).get(hook)
    step = Step(str(installation.pk), plugin.slug, position, True,
                matcher=words.hooks({hook: matcher})[hook] if matcher else None,
                not_granted=sorted(set(plugin.permissions or ()) - set(installation.granted_permissions or ())))
    if not installation.enabled:
        step.runs, step.reason, step.detail = False, DISABLED, "disabled by an admin"
    elif installation.quarantined_until is not None and quarantine.is_quarantined(installation, now):
        until = installation.quarantined_until.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        step.runs, step.reason = False, QUARANTINED
        step.detail = f"quarantined until {until}: {installation.quarantine_reason or 'repeated timeouts'}"
    elif installation.mode == "shadow":
        step.runs, step.reason = False, SHADOW
        step.detail = "runs in shadow after the chain, on a copy of the context; its result is never applied"
    if matcher:
        verdict = check(matcher, context)
        if not verdict.matched and step.runs:
            step.runs, step.reason, step.detail = False, MATCH, f"its matcher does not hold: {verdict.failed}"
        elif not verdict.matched and step.reason == SHADOW:
            step.detail = f"{step.detail}; and its matcher does not hold: {verdict.failed}"
    if step.runs and step.not_granted:
        step.detail = ("runs, but its calls needing " + ", ".join(step.not_granted)
                       + " are refused: not granted to this installation")
    return step

"""Try-runs of an account's current chain: each handler's value before and after, nothing recorded."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from plugins_app.errors import InvalidInput
from plugins_app.runtime.web.chain import HandlerTrace
from plugins_app.services import inputs
from plugins_app.services.execution.execute import execute_hook
from plugins_app.services.hooks import require_hook


@dataclass
class Step:
    trace: HandlerTrace
    before: Any
    after: Any
    cancel_reason: str | None = None


@dataclass
class TryRun:
    hook: str
    outcome: str            # unchanged | changed | cancelled
    before: Any
    after: Any
    context: dict
    steps: list[Step] = field(default_factory=list)
    cancelled_by: str | None = None
    cancel_reason: str | None = None
    effects: list = field(default_factory=list)


def parse_context(text: str) -> dict:
    """The context typed into the form, as JSON; a syntax error names its line and column, and the
    API's rules for nesting and text apply."""
    if inputs.too_deep(text.encode("utf-8", "surrogatepass")):
        raise InvalidInput("context", f"nests arrays and objects deeper than {inputs.MAX_DEPTH} levels")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput("context", f"not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    if not isinstance(value, dict):
        raise InvalidInput("context", "expected a JSON object")
    inputs.check_text(value, "context")
    return value


def try_chain(account, hook: str, context: dict) -> TryRun:
    """Run the account's current chain for `hook` exactly as an execute call would, recording
    nothing, with each handler's resulting value kept so its before and after can be shown."""
    spec = require_hook(hook)
    result, effects = execute_hook(account, hook, context, record=False, trace_values=True)
    before = spec.value_of(context)   # execute_hook has validated it
    run = TryRun(hook, result.outcome, before, result.value, result.context, effects=effects)
    previous = before
    for trace in result.trace:
        step = Step(trace, previous, trace.value)
        if trace.status == "cancelled" and result.cancellation:
            step.cancel_reason = result.cancellation.reason
        run.steps.append(step)
        previous = trace.value
    if result.cancellation:
        run.cancelled_by, run.cancel_reason = result.cancellation.plugin, result.cancellation.reason
    return run


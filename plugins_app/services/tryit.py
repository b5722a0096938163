"""Try-runs of an account's current chain: each handler's value before and after, nothing recorded."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from plugins_app.errors import InvalidInput
from plugins_app.runtime.chain import HandlerTrace, run_chain
from plugins_app.runtime.context import ContextError, validate_context

from .chain_cache import chain_cache
from .chains import require_hook
from .engine import get_pool
from .execution import engine_key
from .host import HostBridge


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
    """The context typed into the form, as JSON; a syntax error names its line and column."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput("context", f"not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    if not isinstance(value, dict):
        raise InvalidInput("context", "expected a JSON object")
    return value


def try_chain(account, hook: str, context: dict) -> TryRun:
    """Run the account's current chain for `hook` one handler at a time, so each handler's input and
    output can be shown. The handlers, order, engine, host bridge and fail-open rules are exactly
    those of execute_hook; the only difference is that nothing is recorded."""
    spec = require_hook(hook)
    try:
        clean = validate_context(spec, context)
    except ContextError as exc:
        raise InvalidInput(f"context.{exc.field}" if exc.field != "context" else "context", exc.message) from None
    bridge = HostBridge(account, spec, clean, record=False)
    run = TryRun(hook, "unchanged", spec.value_of(clean), spec.value_of(clean), clean)
    current = clean
    for handler in chain_cache.handlers(account, hook):
        result = run_chain(get_pool(), engine_key(account), spec, [handler], current, host=bridge)
        for trace in result.trace:
            step = Step(trace, spec.value_of(current), spec.value_of(result.context))
            if result.cancellation:
                step.cancel_reason = result.cancellation.reason
            run.steps.append(step)
        current = result.context
        if result.cancellation:
            run.cancelled_by, run.cancel_reason = result.cancellation.plugin, result.cancellation.reason
            break
    run.context, run.after, run.effects = current, spec.value_of(current), bridge.effects
    if run.cancelled_by:
        run.outcome = "cancelled"
    elif run.after != run.before:
        run.outcome = "changed"
    return run

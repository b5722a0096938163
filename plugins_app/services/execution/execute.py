"""Executing a hook's chain for an account, and recording what it did."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import transaction

from plugins_app.errors import InvalidInput
from plugins_app.models import CancelLog, HandlerWarning, Installation
from plugins_app.runtime.tables.context import MAX_ID_LENGTH, ContextError, validate_context
from plugins_app.runtime.tables.hooks import HookSpec
from plugins_app.runtime.web.chain import ChainResult, Handler, run_chain
from plugins_app.services.engine.tier import engine_key, get_tier
from plugins_app.services.execution import quarantine
from plugins_app.services.execution.chain_cache import chain_cache
from plugins_app.services.execution.host_bridge import HostBridge
from plugins_app.services.execution.observers import ChainRun, after_chain
from plugins_app.services.hooks import require_hook

WARNING_STATUSES = {"error", "timeout", "malformed"}
HandlerSwap = Callable[[list[Handler]], list[Handler]]
HOP_LIMIT = 64   # the highest `hop` an execute call may carry (the platform counts relays)


def execute_request(account, hook: str, body) -> tuple[ChainResult, list]:
    """The execute API's body, checked, then run: {"context", "hop"?, "turnId"?, "conversation"?}."""
    require_hook(hook)
    if not isinstance(body, dict):
        raise InvalidInput("body", "expected a JSON object with a context")
    if "context" not in body:
        raise InvalidInput("context", "this field is required")
    return execute_hook(account, hook, body["context"], hop=body.get("hop", 0), turn_id=body.get("turnId", ""),
                        extras={"conversation": body.get("conversation")})


def execute_hook(account, hook: str, context, *, hop: int = 0, turn_id: str = "",
                 record: bool = True, extras: dict | None = None,
                 trace_values: bool = False, swap: HandlerSwap | None = None) -> tuple[ChainResult, list]:
    """Run the account's chain for `hook`; returns the result and the effects host calls asked for.
    `record=False` (a try-run) writes nothing: no audit rows, metering, strikes or lane moves;
    `trace_values` puts each handler's resulting value in its trace entry; `swap` changes the chain's
    handlers for this one run (a try-run with drafts in place of live code)."""
    spec = require_hook(hook)
    if isinstance(hop, bool) or not isinstance(hop, int) or not 0 <= hop <= HOP_LIMIT:
        raise InvalidInput("hop", f"expected an integer from 0 to {HOP_LIMIT}")
    if not isinstance(turn_id, str) or len(turn_id) > MAX_ID_LENGTH:   # may be empty: no turn
        raise InvalidInput("turnId", f"expected a string of at most {MAX_ID_LENGTH} characters")
    try:
        clean = validate_context(spec, context)
    except ContextError as exc:
        raise InvalidInput(f"context.{exc.field}" if exc.field != "context" else "context", exc.message) from None
    handlers = chain_cache.handlers(account, hook)
    if swap is not None:
        handlers = swap(handlers)
    bridge = HostBridge(account, spec, clean, hop=hop, turn_id=turn_id, extras=extras, record=record)
    result = run_chain(get_tier(), engine_key(account), spec, handlers, clean, host=bridge, hop=hop,
                       trace_values=trace_values, budget_ms=settings.HUB_ENGINE.budget_ms, cpu_ms=settings.HUB_ENGINE.cpu_ms,
                       on_slow=(lambda h: _held_the_isolate(account, h)) if record else None)
    bridge.secrets.scrub(result, handlers)   # before anything is recorded or answered
    if record:
        record_result(account, spec, clean, result, hop=hop, turn_id=turn_id,
                      versions={h.installation_id: h.version for h in handlers})
    return result, bridge.effects


def _held_the_isolate(account, handler) -> None:
    # Heard while the chain still runs: from the next call on, in every process, this
    # installation runs in the lane, so it can't hold up the engines other accounts share.
    quarantine.mark_slow_lane(account.pk, handler.installation_id,
                              "held its engine's isolate for over half a second without yielding")


def record_result(account, spec: HookSpec, context: dict, result: ChainResult, *, hop: int, turn_id: str,
                  versions: dict | None = None):
    """The audit rows of a run (warnings, the cancel), then every after-chain observer.
    `versions`: {installation id: the version that ran}, written on the warnings and the cancel."""
    run = ChainRun(account, spec, context, result, hop, turn_id, versions or {})
    warnings = [_warning(run, t, kind, message) for t in result.trace for kind, message in _warned(t)]
    if warnings or result.cancellation:
        _write_audit(account, spec, context, result, warnings, hop=hop, turn_id=turn_id,
                     version=run.versions.get(result.cancellation.installation_id) if result.cancellation else None)
    after_chain.notify(run)


def _warned(t) -> list[tuple[str, str]]:
    """The warnings one handler's trace entry earns: its failure, and an engine it cost."""
    found = []
    if t.status in WARNING_STATUSES:
        found.append((t.status, t.warning or t.status))
    if t.engine_restarted:
        found.append((HandlerWarning.Kind.ENGINE_RESTART, t.warning or "engine replaced"))
    if t.state_reset:   # not its fault: no strike, but its author learns why its counters went back
        found.append((HandlerWarning.Kind.ENGINE_RESTART, t.state_reset))
    return found


def _warning(run: ChainRun, t, kind: str, message: str) -> HandlerWarning:
    return HandlerWarning(account=run.account, hook=run.spec.name, installation_id=int(t.installation_id),
                          plugin_slug=t.plugin, kind=kind, message=message,
                          plugin_version=run.versions.get(t.installation_id))


@transaction.atomic
def _write_audit(account, spec: HookSpec, context: dict, result: ChainResult, warnings: list, *, hop, turn_id,
                 version=None):
    if warnings:
        HandlerWarning.objects.bulk_create(warnings)
    if result.cancellation:
        c = result.cancellation
        CancelLog.objects.create(
            account=account, hook=spec.name, installation_id=int(c.installation_id),
            plugin_id=_plugin_id(c.installation_id), plugin_slug=c.plugin, plugin_version=version,
            reason=c.reason[:500],
            context=result.context, session_id=_field(context, spec.session_field),
            agent_id=_field(context, spec.agent_field), hop=hop, turn_id=turn_id)


def _field(context: dict, name: str | None) -> str:
    return str(context.get(name) or "") if name else ""


def _plugin_id(installation_id: str):
    return Installation.objects.filter(pk=int(installation_id)).values_list("plugin_id", flat=True).first()

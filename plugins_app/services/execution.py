"""Executing a hook's chain for an account, and recording what it did."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from plugins_app.errors import InvalidInput
from plugins_app.models import CancelLog, HandlerWarning, Installation
from plugins_app.runtime.chain import ChainResult, run_chain
from plugins_app.runtime.context import MAX_ID_LENGTH, ContextError, validate_context
from plugins_app.runtime.hooks import HookSpec

from . import quarantine, shadow
from .chain_cache import chain_cache
from .chains import require_hook
from .engine import get_tier
from .host import HostBridge
from .latency import recorder as latency_recorder
from .metering import meter
from .metrics import observe_handlers, quarantined

WARNING_STATUSES = {"error", "timeout", "malformed"}
MISBEHAVIOUR = {"wedged", "memory"}   # crash kinds that count towards quarantine (with timeouts)
HOP_LIMIT = 64   # the highest `hop` an execute call may carry (the platform counts relays)


def engine_key(account) -> str:
    return f"account-{account.pk}"


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
                 trace_values: bool = False) -> tuple[ChainResult, list]:
    """Run the account's chain for `hook`; returns the result and the effects host calls asked for.
    `record=False` (a try-run) writes no audit rows and no metering; `trace_values` puts each
    handler's resulting value in its trace entry."""
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
    bridge = HostBridge(account, spec, clean, hop=hop, turn_id=turn_id, extras=extras, record=record)
    result = run_chain(get_tier(), engine_key(account), spec, handlers, clean, host=bridge, hop=hop,
                       trace_values=trace_values, budget_ms=settings.HUB_BUDGET_MS,
                       on_slow=lambda h: _held_the_isolate(account, h))
    if record:
        record_result(account, spec, clean, result, hop=hop, turn_id=turn_id,
                      versions={h.installation_id: h.version for h in handlers})
        shadow.schedule(account, spec, result.context, hop=hop, turn_id=turn_id)
    return result, bridge.effects


def _held_the_isolate(account, handler) -> None:
    # Heard while the chain still runs: from the next call on, in every process, this
    # installation runs in the lane, so it can't hold up the engines other accounts share.
    quarantine.mark_slow_lane(account.pk, handler.installation_id,
                              "held its engine's isolate for over half a second without yielding")


def record_result(account, spec: HookSpec, context: dict, result: ChainResult, *, hop: int, turn_id: str,
                  versions: dict | None = None):
    """`versions`: {installation id: the version that ran}, written on the warnings and the cancel."""
    versions = versions or {}
    warnings = []

    def warning(t, kind: str, message: str) -> HandlerWarning:
        return HandlerWarning(account=account, hook=spec.name, installation_id=int(t.installation_id),
                              plugin_slug=t.plugin, kind=kind, message=message,
                              plugin_version=versions.get(t.installation_id))

    for t in result.trace:
        if t.status == "quarantined":
            if t.quarantined_until is not None:   # not for a call held back behind a running one
                quarantine.note_quarantine_skip(account, t.installation_id, spec.name, t.plugin,
                                                until=t.quarantined_until)
            continue
        if t.status == "timeout" or t.crash in MISBEHAVIOUR:
            if quarantine.record_misbehaviour(account.pk, t.installation_id, t.crash or "timeout", t.warning or ""):
                quarantined()
        if t.status in WARNING_STATUSES:
            warnings.append(warning(t, t.status, t.warning or t.status))
        if t.engine_restarted:
            warnings.append(warning(t, HandlerWarning.Kind.ENGINE_RESTART, t.warning or "engine replaced"))
    if warnings or result.cancellation:
        _write_audit(account, spec, context, result, warnings, hop=hop, turn_id=turn_id,
                     version=versions.get(result.cancellation.installation_id) if result.cancellation else None)
    meter.add_runs(account.pk, spec.name, [(t.plugin, t.duration_ms) for t in result.trace if t.status != "quarantined"])
    latency_recorder.record(account.pk, spec.name, result.trace)
    observe_handlers(spec.name, result.trace)
    for sink in LOG_SINKS:
        sink(account, spec, result)


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


# Callables (account, spec, result) that store what handlers logged: the host surface registers one.
LOG_SINKS: list = []


def register_log_sink(sink) -> None:
    if sink not in LOG_SINKS:
        LOG_SINKS.append(sink)

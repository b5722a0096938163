"""Recording a live chain run: its audit rows (warnings, the cancel), then every after-chain observer."""

from __future__ import annotations

from django.db import transaction

from plugins_app.models import CancelLog, HandlerWarning, Installation
from plugins_app.runtime.protocol import FAILED_STATUSES
from plugins_app.runtime.tables.hooks import HookSpec
from plugins_app.runtime.web.chain import ChainResult
from plugins_app.services.execution.observers import ChainRun, after_chain


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
    if t.status in FAILED_STATUSES:
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

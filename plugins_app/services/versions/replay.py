"""Replaying a cancel-log entry or a recorded call against the current chain or a draft, with no side effects."""

from __future__ import annotations

from dataclasses import dataclass, field

from plugins_app.errors import InvalidInput, NotFound
from plugins_app.models import CancelLog, RecordedCall
from plugins_app.runtime.tables.context import ContextError
from plugins_app.runtime.web.chain import ChainResult, Handler
from plugins_app.services.execution.chain_cache import make_version_handler
from plugins_app.services.execution.invoke import Mode, invoke
from plugins_app.services.hooks import require_hook
from plugins_app.services.ids import parse_id
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.versions import releases as versions


@dataclass
class Replay:
    entry: CancelLog
    result: ChainResult
    would_call: list = field(default_factory=list)
    draft: dict | None = None     # {"installationId", "plugin", "version"} when a draft replaced live code
    live_reads: bool = False      # plain GET/HEAD fetches were made for real


def get_entry(account, entry_id) -> CancelLog:
    entry = CancelLog.objects.filter(pk=parse_id(entry_id, "entry_id"), account=account).first()
    if entry is None:
        raise NotFound(f"cancel-log entry {entry_id} not found in this account", field="entry_id")
    return entry


def replay_cancellation(account, entry_id, *, installation_id=None, version=None, live_reads=False) -> Replay:
    """Run the entry's context through the account's chain as it is now (or with one installation's
    `version` in place of its live code). Nothing is written: no cancel log, warnings, logs, metering
    or quarantine strikes; host calls that write or reach outside the hub (fetch, llm, decide, the
    platform, SSH) are answered by stand-ins and listed as "would call". `live_reads` (an account
    admin's choice, never an auditor's) makes plain GET/HEAD fetches for real."""
    entry = get_entry(account, entry_id)
    require_hook(entry.hook)
    draft, swap = None, None
    if (installation_id is None) != (version is None):
        raise InvalidInput("version" if version is None else "installationId",
                           "give both installationId and version to replay against a draft")
    if installation_id is not None:
        swap, draft = _draft_swap(account, entry.hook, installation_id, version)

    def bad_context(exc: ContextError) -> InvalidInput:   # the hook's fields changed since the entry was written
        return InvalidInput("context", f"the recorded context no longer fits {entry.hook}: {exc.message}")

    invocation = invoke(account, entry.hook, entry.context, mode=Mode.REPLAY, origin="replay", hop=entry.hop,
                        turn_id=entry.turn_id, swap=swap, live_reads=live_reads, bad_context=bad_context)
    result, would_call = invocation.result, invocation.would_call
    assert result is not None
    return Replay(entry, result, would_call, draft, live_reads)


def _draft_swap(account, hook: str, installation_id, number):
    """The swap that puts the installation's version `number` in its live code's place (appended when the
    installation is not in this chain; left out when that version does not hook it), and the draft's info."""
    installation = plugins.get_installation(account, installation_id)
    version = versions.get_version(installation, number)
    drafted = make_version_handler(installation, version)

    def swap(handlers: list[Handler]) -> list[Handler]:
        base = next((h for h in handlers if h.installation_id == str(installation.pk)), None)
        others = [h for h in handlers if h.installation_id != str(installation.pk)]
        if hook in version.hooks:
            if base is not None:
                others.insert(handlers.index(base), drafted)
            else:
                others.append(drafted)
        return others
    info = {"installationId": str(installation.pk), "plugin": installation.plugin.slug, "version": version.number}
    return swap, info


def replay_call(account, call_id, *, installation_id=None, version=None) -> dict:
    """Run a recorded call's context through the account's chain as it is now (or with one installation's
    `version` in place of its live code), with nothing written, beside what was recorded."""
    call = RecordedCall.objects.filter(pk=parse_id(call_id, "call_id"), account=account).first()
    if call is None:
        raise NotFound(f"recorded call {call_id} not found in this account", field="call_id")
    require_hook(call.hook)
    draft, swap = None, None
    if (installation_id is None) != (version is None):
        raise InvalidInput("version" if version is None else "installationId",
                           "give both installationId and version to replay against a draft")
    if installation_id is not None:
        swap, draft = _draft_swap(account, call.hook, installation_id, version)

    def bad_context(exc: ContextError) -> InvalidInput:
        return InvalidInput("context", f"the recorded context no longer fits {call.hook}: {exc.message}")

    invocation = invoke(account, call.hook, call.context, mode=Mode.REPLAY, origin="replay", hop=call.hop,
                        turn_id=call.turn_id, swap=swap, bad_context=bad_context)
    result = invocation.result
    assert result is not None
    c = result.cancellation
    return {"callId": str(call.pk), "hook": call.hook, "draft": draft,
            "recorded": {"outcome": call.outcome, "value": call.value, "cancelledBy": call.cancelled_by or None,
                         "reason": call.reason or None, "versions": call.versions, "at": call.created_at.isoformat()},
            "replayed": {"outcome": result.outcome, "value": result.value,
                         "cancelledBy": c.plugin if c else None, "reason": c.reason if c else None,
                         "trace": [{"installationId": t.installation_id, "plugin": t.plugin, "status": t.status,
                                    "changed": t.changed, "durationMs": t.duration_ms, "warning": t.warning}
                                   for t in result.trace]},
            "sameOutcome": (result.outcome, result.value) == (call.outcome, call.value),
            "wouldCall": invocation.would_call}


def as_dict(replay: Replay) -> dict:
    """The recorded outcome and the replayed one, side by side."""
    entry, result = replay.entry, replay.result
    c = result.cancellation
    return {
        "entryId": str(entry.pk),
        "hook": entry.hook,
        "draft": replay.draft,
        "recorded": {"outcome": "cancelled", "installationId": str(entry.installation_id or ""),
                     "plugin": entry.plugin_slug, "version": entry.plugin_version, "reason": entry.reason,
                     "at": entry.created_at.isoformat()},
        "replayed": {
            "outcome": result.outcome,
            "value": result.value,
            "cancellation": None if c is None else {"installationId": c.installation_id, "plugin": c.plugin,
                                                     "reason": c.reason},
            "trace": [{"installationId": t.installation_id, "plugin": t.plugin, "status": t.status,
                       "changed": t.changed, "durationMs": t.duration_ms, "warning": t.warning, "at": t.at,
                       **({"reason": t.reason} if t.reason else {})}
                      for t in result.trace],
        },
        "sameOutcome": c is not None and c.plugin == entry.plugin_slug,
        "wouldCall": replay.would_call,
        "liveReads": replay.live_reads,
    }

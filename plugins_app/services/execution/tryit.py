"""Try-runs of an account's chain, as it is or with chosen versions (drafts) in place of live code: each
handler's value before and after, nothing recorded, nothing outside the hub acted on."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from plugins_app.errors import InvalidInput, NotFound
from plugins_app.models import Installation, PluginVersion
from plugins_app.runtime.web.chain import Handler, HandlerTrace
from plugins_app.services import inputs
from plugins_app.services.execution.chain_cache import make_version_handler
from plugins_app.services.execution.invoke import Mode, invoke
from plugins_app.services.hooks import require_hook
from plugins_app.services.plugins import installations as plugins

MAX_SWAPPED = 50   # versions one try-run may swap in


@dataclass
class Step:
    trace: HandlerTrace
    before: Any
    after: Any
    cancel_reason: str | None = None
    version: int | None = None   # the version of its installation's code that ran


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
    versions: dict[str, int] = field(default_factory=dict)   # installation id -> the version tried
    would_call: list = field(default_factory=list)   # the host calls stood in for, with their answers
    live_reads: bool = False                         # plain GET/HEAD fetches were made for real


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


def chosen_versions(account, versions) -> dict[Installation, PluginVersion]:
    """`versions` ({"<installation id>": <version number>}) checked against the account: each names one
    of its installations and one of that installation's versions."""
    if versions is None:
        return {}
    if not isinstance(versions, dict) or len(versions) > MAX_SWAPPED:
        raise InvalidInput("versions", f"expected an object of at most {MAX_SWAPPED} installation ids to version numbers")
    chosen = {}
    for key, number in versions.items():
        installation = plugins.get_installation(account, key, field=f"versions.{key}")
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise InvalidInput(f"versions.{key}", "expected a version number (1, 2, ...)")
        version = installation.versions.filter(number=number).first()
        if version is None:
            raise NotFound(f"installation {installation.pk} ({installation.plugin.slug}) has no version {number}",
                           field=f"versions.{key}")
        chosen[installation] = version
    return chosen


def _swapper(hook: str, chosen: dict[Installation, PluginVersion]):
    """The chain's handlers with each chosen version in its installation's place (appended when the
    installation is not in this chain yet; left out when that version does not hook it)."""
    def swap(handlers: list[Handler]) -> list[Handler]:
        out = list(handlers)
        for installation, version in chosen.items():
            at = next((i for i, h in enumerate(out) if h.installation_id == str(installation.pk)), None)
            drafted = make_version_handler(installation, version)
            if at is not None:
                out.pop(at)
            if hook in version.hooks:
                out.insert(len(out) if at is None else at, drafted)
        return out
    return swap


def try_chain(account, hook: str, context: dict, versions=None, *, live_reads: bool = False) -> TryRun:
    """Run the account's chain for `hook` as an execute call would (with `versions` swapped in for
    their installations' live code), recording nothing, with each handler's resulting value kept so
    its before and after can be shown. As in a replay, host calls that write or reach outside the hub
    (fetch, llm, decide, SSH, workspace writes, peer messages) are answered by stand-ins and listed in
    `would_call`; `live_reads` (an account admin's choice) makes plain GET/HEAD fetches for real."""
    spec = require_hook(hook)
    chosen = chosen_versions(account, versions)
    ran: dict[str, int | None] = {}   # installation id -> the version its handler carried

    def swap(handlers: list[Handler]) -> list[Handler]:
        out = _swapper(hook, chosen)(handlers) if chosen else handlers
        ran.update({h.installation_id: h.version for h in out})
        return out

    invocation = invoke(account, hook, context, mode=Mode.TRY, origin="try", swap=swap, live_reads=live_reads)
    result, effects, bridge = invocation.result, invocation.effects, invocation.bridge
    assert result is not None and bridge is not None
    # The value as sent (invoke has checked it), a granted secret's value redacted as in the result.
    before = bridge.secrets.redactor.data(spec.value_of(context))
    run = TryRun(hook, result.outcome, before, result.value, result.context, effects=effects,
                 versions={str(i.pk): v.number for i, v in chosen.items()},
                 would_call=invocation.would_call, live_reads=live_reads)
    previous = before
    for trace in result.trace:
        step = Step(trace, previous, trace.value, version=ran.get(trace.installation_id))
        if trace.status == "cancelled" and result.cancellation:
            step.cancel_reason = result.cancellation.reason
        run.steps.append(step)
        previous = trace.value
    if result.cancellation:
        run.cancelled_by, run.cancel_reason = result.cancellation.plugin, result.cancellation.reason
    return run


"""Checking a version against recorded calls: run it at its installation's place on the inputs that
place saw, beside the live code, with nothing written, and answer the comparison shadow answers.

Per recorded call, two runs through the seam in REPLAY mode, awaited a batch at a time on an event loop
of the check's own (the engines run a batch's chains interleaved) (stand-ins for host calls that write or
reach out; no cancel rows, warnings, strikes, logs or kv): the live chain up to the installation's
place, with each handler's value traced (the input at the place and the live version's result), then
the candidate alone on that input. A deploy can be guarded by it (`max_different`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from plugins_app.errors import Conflict, HubError, InvalidInput
from plugins_app.models import Installation, PluginVersion, RecordedCall
from plugins_app.runtime.tables.context import ContextError
from plugins_app.runtime.web.chain import Handler
from plugins_app.services.execution.chain_cache import chain_cache, make_version_handler
from plugins_app.services.execution.invoke import Invocation, Mode, finish, prepare, run_async
from plugins_app.services.hooks import require_hook
from plugins_app.services.observability.metering import meter
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.secrets.egress import account_redactor
from plugins_app.services.versions import compare, recording
from plugins_app.services.versions import releases as versions

MAX_CALLS = 1000          # recorded calls one check runs on (the default bound of what is kept per hook)
DEFAULT_CALLS = 200
CHECK_SUFFIX = ":check"
IN_FLIGHT = 16            # recorded calls whose engine runs a check has in flight at once   # usage rows of check runs: "<slug>:check", apart from live and shadow runs


class CheckFailed(Conflict):
    default_code = "check_failed"

    def __init__(self, report: dict, max_different: float):
        super().__init__(f"{report['summary']}: {report['differentPercent']}% not the same, past the "
                         f"{max_different:g}% allowed; nothing was deployed", check=report)


@dataclass
class Check:
    installation: Installation
    version: PluginVersion
    tally: compare.Tally = field(default_factory=compare.Tally)
    skipped: int = 0        # recorded calls whose context no longer fits the hook, or the candidate did not run
    hooks: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"installationId": str(self.installation.pk), "plugin": self.installation.plugin.slug,
                "version": self.version.number, "liveVersion": self.installation.live_version,
                "hooks": self.hooks, **self.tally.as_dict(), "skipped": self.skipped,
                "summary": compare.summary(self.tally)}


def calls_count(calls) -> int:
    if calls is None:
        return DEFAULT_CALLS
    if isinstance(calls, bool) or not isinstance(calls, int) or not 1 <= calls <= MAX_CALLS:
        raise InvalidInput("calls", f"expected an integer from 1 to {MAX_CALLS}")
    return calls


def percent(value, name: str = "maxDifferent") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
        raise InvalidInput(name, "expected a percentage from 0 to 100")
    return float(value)


def check(account, installation_id, number, calls=None) -> Check:
    """Run version `number` of the installation against its hooks' newest `calls` recorded calls."""
    count = calls_count(calls)
    if isinstance(number, bool) or not isinstance(number, (int, str)):
        raise InvalidInput("version", "expected a version number (1, 2, ...)")
    installation = plugins.get_installation(account, installation_id)
    version = versions.get_version(installation, number)
    hooks = sorted(set(version.hooks))
    result = Check(installation, version, hooks=hooks)
    rows = list(RecordedCall.objects.filter(account=account, hook__in=hooks,
                                            created_at__gte=recording.oldest_kept())
                .order_by("-created_at", "-id")[:count])
    candidate = make_version_handler(installation, version)
    redactor = account_redactor(account.pk)
    durations: dict[str, list[tuple[str, float]]] = {}
    loop = asyncio.new_event_loop()   # the engine runs of a batch are awaited together on it
    try:
        rows.reverse()   # oldest first: Tally keeps the newest examples
        for start in range(0, len(rows), IN_FLIGHT):
            batch = rows[start:start + IN_FLIGHT]
            for row, outcome in zip(batch, _compare_batch(loop, account, batch, candidate), strict=True):
                if outcome is None:
                    result.skipped += 1
                    continue
                kind, example, duration_ms = outcome
                result.tally.add(kind, redactor.data(example))
                durations.setdefault(row.hook, []).append((installation.plugin.slug + CHECK_SUFFIX, duration_ms))
    finally:
        loop.close()
    for hook, runs in durations.items():
        meter.add_runs(account.pk, hook, runs)
    return result


Outcome = tuple[str, dict, float] | None


def _compare_batch(loop: asyncio.AbstractEventLoop, account, rows: list[RecordedCall],
                   candidate: Handler) -> list[Outcome]:
    """Each row's comparison: the live chains up to the place, all in flight at once, then the candidate
    on each input they gave, all in flight at once."""
    mine = candidate.installation_id
    lives: list[Invocation | None] = []
    for row in rows:
        chain = chain_cache.handlers(account, row.hook)
        ids = [h.installation_id for h in chain]
        # The live chain up to the installation's place (all of it when the version adds this hook).
        prefix = chain[:ids.index(mine) + 1] if mine in ids else chain
        lives.append(_prepare(account, row, row.context, prefix))
    _run_all(loop, lives)
    places: list[tuple[Any, compare.Side] | None] = []
    runs: list[Invocation | None] = []
    for row, live_run in zip(rows, lives, strict=True):
        place = None if live_run is None else _place(account, row, live_run, mine)
        places.append(place)
        runs.append(None if place is None or live_run is None else
                    _prepare(account, row, compare.with_value(require_hook(row.hook), live_run.context, place[0]),
                             [candidate]))
    _run_all(loop, runs)
    outcomes: list[Outcome] = []
    for row, place, run in zip(rows, places, runs, strict=True):
        side = None if place is None or run is None or run.result is None else \
            compare.candidate_side(require_hook(row.hook), place[0], run.result)
        if place is None or side is None or run is None or run.result is None:
            outcomes.append(None)
            continue
        example = compare.example(place[0], place[1], side, hook=row.hook, callId=str(row.pk),
                                  at=row.created_at.isoformat())
        outcomes.append((compare.kind_of(place[1], side), example, run.result.trace[0].duration_ms))
    return outcomes


def _place(account, row: RecordedCall, live_run: Invocation, mine: str) -> tuple[Any, compare.Side] | None:
    """The input at the installation's place in the live run and what the live version made of it."""
    assert live_run.result is not None
    spec = require_hook(row.hook)
    steps = compare.steps_of(spec, live_run.context, live_run.result)
    ids = [h.installation_id for h in live_run.handlers]
    if mine in ids:
        return compare.at_place(spec, live_run.context, steps, mine)
    return compare.at_place(spec, live_run.context, steps, None, ids)


def _prepare(account, row: RecordedCall, context: dict, handlers: list[Handler]) -> Invocation | None:
    """A replay-mode run of `handlers` on `context`, ready for the engine; None when the recorded context
    no longer fits the hook (that call is skipped)."""
    try:
        return prepare(account, row.hook, context, mode=Mode.REPLAY, origin="check", hop=row.hop,
                       turn_id=row.turn_id, handlers=handlers, bad_context=_unfit, asynchronous=True)
    except _Unfit:
        return None


def _run_all(loop: asyncio.AbstractEventLoop, invocations: list[Invocation | None]) -> None:
    """The engine runs of `invocations`, awaited together, then each finished (scrubbed, probes closed);
    the first failure (no engine, say) is raised once every run is settled."""
    ready = [i for i in invocations if i is not None]

    async def together() -> list[Any]:
        return await asyncio.gather(*(run_async(i) for i in ready), return_exceptions=True)

    outcomes = loop.run_until_complete(together())
    failure = next((o for o in outcomes if isinstance(o, BaseException)), None)
    for invocation, outcome in zip(ready, outcomes, strict=True):
        if not isinstance(outcome, BaseException):
            finish(invocation)
    if failure is not None:
        raise failure


class _Unfit(HubError):
    """A recorded context the hook's fields no longer accept: that call is skipped."""


def _unfit(exc: ContextError) -> _Unfit:
    return _Unfit(exc.message)


def deploy_checked(account, installation_id, number, *, grant=None, calls=None, max_different=None):
    """Deploy version `number` after checking it (when `calls` or `max_different` is given): past
    `max_different` percent of calls not the same, CheckFailed and nothing is deployed. Returns the
    installation, the version and the check's report (None when unchecked)."""
    limit = percent(max_different)
    report = None
    if calls is not None or limit is not None:
        report = check(account, installation_id, number, calls).as_dict()
        if limit is not None and report["differentPercent"] > limit:
            raise CheckFailed(report, limit)
    with transaction.atomic():
        installation, version = versions.deploy(account, installation_id, number, grant=grant)
    return installation, version, report

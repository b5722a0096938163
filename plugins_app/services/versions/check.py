"""Checking a version against recorded calls: run it at its installation's place on the inputs that
place saw, beside the live code, with nothing written, and answer the comparison shadow answers.

Per recorded call, two runs through the seam in REPLAY mode (stand-ins for host calls that write or
reach out; no cancel rows, warnings, strikes, logs or kv): the live chain up to the installation's
place, with each handler's value traced (the input at the place and the live version's result), then
the candidate alone on that input. A deploy can be guarded by it (`max_different`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from plugins_app.errors import Conflict, HubError, InvalidInput
from plugins_app.models import Installation, PluginVersion, RecordedCall
from plugins_app.runtime.tables.context import ContextError
from plugins_app.runtime.web.chain import Handler
from plugins_app.services.execution.chain_cache import chain_cache, make_version_handler
from plugins_app.services.execution.invoke import Mode, invoke
from plugins_app.services.hooks import require_hook
from plugins_app.services.observability.metering import meter
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.secrets.egress import account_redactor
from plugins_app.services.versions import compare, recording
from plugins_app.services.versions import releases as versions

MAX_CALLS = 1000          # recorded calls one check runs on (the default bound of what is kept per hook)
DEFAULT_CALLS = 200
CHECK_SUFFIX = ":check"   # usage rows of check runs: "<slug>:check", apart from live and shadow runs


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
    for row in reversed(rows):   # oldest first: Tally keeps the newest examples
        outcome = _compare_one(account, row, candidate)
        if outcome is None:
            result.skipped += 1
            continue
        kind, example, duration_ms = outcome
        result.tally.add(kind, redactor.data(example))
        durations.setdefault(row.hook, []).append((installation.plugin.slug + CHECK_SUFFIX, duration_ms))
    for hook, runs in durations.items():
        meter.add_runs(account.pk, hook, runs)
    return result


def _compare_one(account, row: RecordedCall, candidate: Handler) -> tuple[str, dict, float] | None:
    spec = require_hook(row.hook)
    chain = chain_cache.handlers(account, row.hook)
    ids = [h.installation_id for h in chain]
    mine = candidate.installation_id
    # The live chain up to the installation's place (all of it when the version adds this hook).
    prefix = chain[:ids.index(mine) + 1] if mine in ids else chain
    try:
        live_run = invoke(account, row.hook, row.context, mode=Mode.REPLAY, origin="check", hop=row.hop,
                          turn_id=row.turn_id, handlers=prefix, bad_context=_unfit)
        assert live_run.result is not None
        steps = compare.steps_of(spec, live_run.context, live_run.result)
        place = (compare.at_place(spec, live_run.context, steps, mine) if mine in ids
                 else compare.at_place(spec, live_run.context, steps, None, ids))
        if place is None:   # the live chain cancels before the place: the version would not be asked
            return None
        given, live = place
        run = invoke(account, row.hook, compare.with_value(spec, live_run.context, given), mode=Mode.REPLAY,
                     origin="check", hop=row.hop, turn_id=row.turn_id, handlers=[candidate])
    except _Unfit:
        return None
    assert run.result is not None
    side = compare.candidate_side(spec, given, run.result)
    if side is None:
        return None
    example = compare.example(given, live, side, hook=row.hook, callId=str(row.pk), at=row.created_at.isoformat())
    return compare.kind_of(live, side), example, run.result.trace[0].duration_ms


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

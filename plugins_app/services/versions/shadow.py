"""Shadow mode: installations (or drafts) that run after the live chain on a copy of the context, in a
Celery task after the answer has gone out; their vetoes and changes are recorded, never applied."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import F

from accounts.models import Account
from plugins_app.errors import Conflict, InvalidInput
from plugins_app.models import AccountChange, Installation, ShadowSample, ShadowStat
from plugins_app.runtime.tables.hooks import HookSpec
from plugins_app.runtime.tables.members import HOST_MEMBERS
from plugins_app.runtime.web.chain import NOT_RUN, Handler
from plugins_app.services.audit import changes
from plugins_app.services.execution.chain_cache import chain_cache, shadow_key
from plugins_app.services.execution.host_bridge import WRITES
from plugins_app.services.execution.invoke import Mode, invoke
from plugins_app.services.execution.observers import ChainRun
from plugins_app.services.hooks import require_hook
from plugins_app.services.observability.metering import meter
from plugins_app.services.plugins import chains
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.scheduling import task_queue
from plugins_app.services.versions import releases as versions

logger = logging.getLogger(__name__)

MODES = ("live", "shadow")
SAMPLES_KEPT = 20          # per installation and kind
SHADOW_SUFFIX = ":shadow"  # usage rows of shadow runs: "<slug>:shadow" (a slug has no colon)
FAILURES = {"error", "timeout", "malformed"}


def schedule(account, spec: HookSpec, context: dict, *, hop: int, turn_id: str) -> bool:
    """After a recorded execute call: queue the shadow run when anything shadows this hook. The caller's
    answer does not wait for it (a Celery worker runs it)."""
    if not chain_cache.handlers(account, shadow_key(spec.name)):
        return False
    try:
        task_queue.enqueue(task_queue.RUN_SHADOW, account.pk, spec.name, context, hop, turn_id)
    except Exception:   # a broker outage must not fail the live call that already ran
        logger.exception("could not queue the shadow run of %s for account %s", spec.name, account.pk)
        return False
    return True


def observe_chain(run: ChainRun) -> None:
    """After a recorded execute call (an after-chain observer): queue its shadow runs, if any."""
    schedule(run.account, run.spec, run.result.context, hop=run.hop, turn_id=run.turn_id)


def run(account_id: int, hook: str, context: dict, hop: int = 0, turn_id: str = "") -> int:
    """Run each shadow handler of `hook` alone on a copy of `context`; returns how many ran."""
    account = Account.objects.filter(pk=account_id).first()
    if account is None:
        return 0
    spec = require_hook(hook)
    ran = 0
    for handler in chain_cache.handlers(account, shadow_key(hook)):
        if _run_one(account, spec, handler, context, hop, turn_id):
            ran += 1
    return ran


def _run_one(account, spec: HookSpec, handler: Handler, context: dict, hop: int, turn_id: str) -> bool:
    invocation = invoke(account, spec.name, dict(context), mode=Mode.SHADOW, origin="shadow", hop=hop,
                        turn_id=turn_id, handlers=[handler])
    result, bridge = invocation.result, invocation.bridge
    assert result is not None and bridge is not None
    trace = result.trace[0] if result.trace else None
    if trace is None or trace.status in NOT_RUN:   # quarantined, or its matcher left it out: nothing ran
        return False
    meter.add_runs(account.pk, spec.name, [(handler.plugin + SHADOW_SUFFIX, trace.duration_ms)])
    # The report shows each example's input: a secret value the platform sent is redacted there too.
    before = bridge.secrets.redactor.data(spec.value_of(context))
    sample, counter = None, None
    if trace.status == "cancelled" and result.cancellation:
        counter = "would_cancel"
        sample = ShadowSample(kind=ShadowSample.Kind.CANCEL, message=result.cancellation.reason[:500],
                              before=before)
    elif trace.status in FAILURES:
        counter = "failed"
        sample = ShadowSample(kind=ShadowSample.Kind.FAILURE, message=(trace.warning or trace.status)[:500],
                              before=before)
    elif trace.changed:
        counter = "would_change"
        sample = ShadowSample(kind=ShadowSample.Kind.CHANGE, before=before, after=result.value)
    _count(int(handler.installation_id), spec.name, handler.version, counter, sample)
    return True


def _count(installation_id: int, hook: str, version, counter: str | None, sample: ShadowSample | None) -> None:
    with transaction.atomic():
        if not Installation.objects.filter(pk=installation_id).exists():
            return   # uninstalled since the call
        stat, _ = ShadowStat.objects.get_or_create(installation_id=installation_id)
        increments = {"calls": F("calls") + 1}
        if counter:
            increments[counter] = F(counter) + 1
        ShadowStat.objects.filter(pk=stat.pk).update(**increments)
        if sample is not None:
            sample.installation_id, sample.hook, sample.version = installation_id, hook, version
            sample.save()
            stale = (ShadowSample.objects.filter(installation_id=installation_id, kind=sample.kind)
                     .order_by("-created_at", "-id").values_list("pk", flat=True)[SAMPLES_KEPT:])
            ShadowSample.objects.filter(pk__in=list(stale)).delete()


def _reset(installation: Installation) -> None:
    ShadowStat.objects.filter(installation=installation).delete()
    ShadowSample.objects.filter(installation=installation).delete()


@transaction.atomic
def set_mode(account, installation_id, mode=None, shadow_version=...) -> Installation:
    """Put an installation in shadow or back live, and/or shadow one of its drafts (None stops it)."""
    chains.lock_account(account.pk)
    installation = plugins.get_installation(account, installation_id)
    before = {"mode": installation.mode, "shadowVersion": installation.shadow_version}
    if mode is not None:
        if mode not in MODES:
            raise InvalidInput("mode", "expected \"live\" or \"shadow\"")
        installation.mode = mode
    if shadow_version is not ...:
        installation.shadow_version = _draft_number(installation, shadow_version)
    after = {"mode": installation.mode, "shadowVersion": installation.shadow_version}
    if after == before:
        return installation
    if after["mode"] == "shadow" and after["shadowVersion"] is not None:
        raise InvalidInput("shadowVersion", "an installation in shadow runs its live code in shadow already; "
                                            "put it live to shadow a draft next to it")
    installation.save(update_fields=["mode", "shadow_version", "updated_at"])
    _reset(installation)   # a new trial: counts start again
    chains.mark_changed(account.pk)
    changes.record(account.pk, AccountChange.Action.SHADOW, f"{installation.plugin.slug}: {_describe(after)}",
                   installation=installation, before=before, after=after)
    return installation


def _draft_number(installation: Installation, number) -> int | None:
    if number is None:
        return None
    if isinstance(number, bool) or not isinstance(number, int):
        raise InvalidInput("shadowVersion", "expected a version number or null")
    version = versions.get_version(installation, number)
    if version.number == installation.live_version:
        raise InvalidInput("shadowVersion", f"version {number} is the live one; shadow a draft")
    missing = versions.not_granted(installation, version)
    if missing:
        raise versions.PermissionNotGranted(version, missing)
    return version.number


def _describe(state: dict) -> str:
    if state["mode"] == "shadow":
        return "runs in shadow"
    if state["shadowVersion"] is not None:
        return f"live, with version {state['shadowVersion']} in shadow"
    return "live, nothing in shadow"


def promote(account, installation_id) -> Installation:
    """Shadow to live in one step: a shadowed installation joins its chains again (at the places it kept);
    a shadowed draft is deployed."""
    installation = plugins.get_installation(account, installation_id)
    if installation.mode == "shadow":
        set_mode(account, installation.pk, "live")
    elif installation.shadow_version is not None:
        with transaction.atomic():
            number = installation.shadow_version
            set_mode(account, installation.pk, shadow_version=None)
            versions.deploy(account, installation.pk, number)
    else:
        raise Conflict(f"{installation.plugin.slug} has nothing in shadow to promote")
    installation = plugins.get_installation(account, installation_id)
    changes.record(account.pk, AccountChange.Action.PROMOTE, f"{installation.plugin.slug}: promoted to live "
                                                             f"(version {installation.live_version})",
                   installation=installation, after={"mode": "live", "version": installation.live_version})
    return installation


def report(account, installation_id) -> dict:
    """Counts since the trial began and the recent examples, as the API answers them."""
    installation = plugins.get_installation(account, installation_id)
    stat = ShadowStat.objects.filter(installation=installation).first()
    samples = list(ShadowSample.objects.filter(installation=installation).order_by("-created_at", "-id"))

    def examples(kind: str) -> list[ShadowSample]:
        return [s for s in samples if s.kind == kind]

    return {
        "installationId": str(installation.pk),
        "mode": installation.mode,
        "shadowVersion": installation.shadow_version,
        "since": stat.since.isoformat() if stat else None,
        "counts": {"calls": stat.calls if stat else 0, "wouldCancel": stat.would_cancel if stat else 0,
                   "wouldChange": stat.would_change if stat else 0, "failed": stat.failed if stat else 0},
        "wouldCancel": [{"hook": s.hook, "version": s.version, "input": s.before, "reason": s.message,
                         "at": s.created_at.isoformat()} for s in examples(ShadowSample.Kind.CANCEL)],
        "wouldChange": [{"hook": s.hook, "version": s.version, "before": s.before, "after": s.after,
                         "at": s.created_at.isoformat()} for s in examples(ShadowSample.Kind.CHANGE)],
        "failed": [{"hook": s.hook, "version": s.version, "input": s.before, "message": s.message,
                    "at": s.created_at.isoformat()} for s in examples(ShadowSample.Kind.FAILURE)],
        "standIns": stood_in_members(installation.granted_permissions),
    }


def stood_in_members(granted) -> list[str]:
    """The host members this installation may call whose calls a shadow run answers from a stand-in (those
    that write or reach outside the hub): a shadow run never acts on the world."""
    return [f"host.{m.name}" for m in HOST_MEMBERS
            if m.bridged and (m.outward or m.name in WRITES) and (m.permission is None or m.permission in granted)]

"""Shadow: a draft runs at its live version's place on the input that place saw (an installation in shadow
mode, at the place it kept), in a Celery task after the answer has gone out; each call is compared with
the live result there (services/versions/compare.py) and counted, never applied."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import F

from accounts.models import Account
from plugins_app.errors import Conflict, InvalidInput
from plugins_app.models import AccountChange, ChainEntry, Installation, ShadowSample, ShadowStat
from plugins_app.runtime.tables.hooks import HookSpec
from plugins_app.runtime.tables.members import HOST_MEMBERS
from plugins_app.runtime.web.chain import Handler
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
from plugins_app.services.secrets.egress import account_redactor
from plugins_app.services.versions import compare
from plugins_app.services.versions import releases as versions

logger = logging.getLogger(__name__)

MODES = ("live", "shadow")
SAMPLES_KEPT = 20          # per installation and kind
SHADOW_SUFFIX = ":shadow"  # usage rows of shadow runs: "<slug>:shadow" (a slug has no colon)


def schedule(account, spec: HookSpec, context: dict, *, hop: int, turn_id: str, steps: list | None = None) -> bool:
    """After a recorded execute call: queue the shadow run when anything shadows this hook. The caller's
    answer does not wait for it (a Celery worker runs it). `context` is the one the live chain received;
    `steps` what each live handler was given and did (compare.Step.as_dict), for runs at their place."""
    if not chain_cache.handlers(account, shadow_key(spec.name)):
        return False
    try:
        task_queue.enqueue(task_queue.RUN_SHADOW, account.pk, spec.name, context, hop, turn_id, steps)
    except Exception:   # a broker outage must not fail the live call that already ran
        logger.exception("could not queue the shadow run of %s for account %s", spec.name, account.pk)
        return False
    return True


def observe_chain(run: ChainRun) -> None:
    """After a recorded execute call (an after-chain observer): queue its shadow runs, if any, with the
    input each live handler saw (the seam kept the values of a hook something shadows)."""
    if not chain_cache.handlers(run.account, shadow_key(run.spec.name)):
        return
    steps = [s.as_dict() for s in compare.steps_of(run.spec, run.context, run.result)]
    schedule(run.account, run.spec, run.context, hop=run.hop, turn_id=run.turn_id, steps=steps)


def run(account_id: int, hook: str, context: dict, hop: int = 0, turn_id: str = "",
        steps: list | None = None) -> int:
    """Run each shadow handler of `hook` alone, at its place, on the input that place saw in the live
    chain; returns how many ran. Without `steps` (a run queued before they were sent) `context` is taken
    as the input of every shadow handler, as it was then."""
    account = Account.objects.filter(pk=account_id).first()
    if account is None:
        return 0
    spec = require_hook(hook)
    live = [h.installation_id for h in chain_cache.handlers(account, hook)]
    order = [str(i) for i in ChainEntry.objects.filter(account_id=account_id, hook=hook)
             .order_by("position", "id").values_list("installation_id", flat=True)]
    known = [compare.Step.from_dict(s) for s in steps] if steps is not None else None
    redactor = account_redactor(account_id)
    ran = 0
    for handler in chain_cache.handlers(account, shadow_key(hook)):
        place: tuple[Any, compare.Side] | None
        if known is None:
            place = (spec.value_of(context), compare.Side("unchanged", spec.value_of(context)))
        elif handler.installation_id in live:   # a shadowed draft: at its live version's place
            place = compare.at_place(spec, context, known, handler.installation_id)
        else:   # in shadow mode: after the live handlers ahead of the place it kept
            mine = order.index(handler.installation_id) if handler.installation_id in order else len(order)
            place = compare.at_place(spec, context, known, None,
                                     [i for i in order[:mine] if i in live])
        if place is not None and _run_one(account, spec, handler, context, place, hop, turn_id, redactor):
            ran += 1
    return ran


def _run_one(account, spec: HookSpec, handler: Handler, context: dict, place: tuple, hop: int, turn_id: str,
             redactor) -> bool:
    given, live = place
    invocation = invoke(account, spec.name, compare.with_value(spec, context, given), mode=Mode.SHADOW,
                        origin="shadow", hop=hop, turn_id=turn_id, handlers=[handler])
    assert invocation.result is not None
    candidate = compare.candidate_side(spec, given, invocation.result)
    if candidate is None:   # quarantined, or its matcher left it out: it did not run
        return False
    meter.add_runs(account.pk, spec.name, [(handler.plugin + SHADOW_SUFFIX, invocation.result.trace[0].duration_ms)])
    kind = compare.kind_of(live, candidate)
    # Examples show what the platform sent: every secret value of the account is redacted there.
    example = redactor.data(compare.example(given, live, candidate, hook=spec.name, version=handler.version))
    sample = ShadowSample(kind=SAMPLE_KINDS[kind], before=example["input"], after=example["candidate"]["value"],
                          message=(candidate.reason or live.reason or "")[:500], example=example)
    _count(int(handler.installation_id), spec.name, handler.version, kind, sample)
    return True


# Each comparison kind's counter and sample kind ("different" keeps the older would_change counter).
COUNTERS = {"same": "same", "different": "would_change", "wouldCancel": "would_cancel",
            "wouldNoLongerCancel": "would_no_longer_cancel", "failed": "failed"}
SAMPLE_KINDS = {"same": ShadowSample.Kind.SAME, "different": ShadowSample.Kind.CHANGE,
                "wouldCancel": ShadowSample.Kind.CANCEL, "wouldNoLongerCancel": ShadowSample.Kind.UNCANCEL,
                "failed": ShadowSample.Kind.FAILURE}


def _count(installation_id: int, hook: str, version, kind: str, sample: ShadowSample) -> None:
    with transaction.atomic():
        if not Installation.objects.filter(pk=installation_id).exists():
            return   # uninstalled since the call
        stat, _ = ShadowStat.objects.get_or_create(installation_id=installation_id)
        counter = COUNTERS[kind]
        ShadowStat.objects.filter(pk=stat.pk).update(calls=F("calls") + 1, **{counter: F(counter) + 1})
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
    """Counts since the trial began and the recent examples, as the API answers them: `counts` and
    `examples` by comparison kind (input, live result, candidate result side by side), and the older
    wouldCancel / wouldChange / failed lists."""
    installation = plugins.get_installation(account, installation_id)
    stat = ShadowStat.objects.filter(installation=installation).first()
    samples = list(ShadowSample.objects.filter(installation=installation).order_by("-created_at", "-id"))

    def examples(kind: str) -> list[ShadowSample]:
        return [s for s in samples if s.kind == kind]

    def count(name: str) -> int:
        return getattr(stat, name) if stat else 0

    return {
        "installationId": str(installation.pk),
        "mode": installation.mode,
        "shadowVersion": installation.shadow_version,
        "since": stat.since.isoformat() if stat else None,
        "counts": {"calls": count("calls"), "same": count("same"), "different": count("would_change"),
                   "wouldCancel": count("would_cancel"), "wouldNoLongerCancel": count("would_no_longer_cancel"),
                   "failed": count("failed"), "wouldChange": count("would_change")},
        "examples": {kind: [{**(s.example or {}), "at": s.created_at.isoformat()}
                            for s in examples(SAMPLE_KINDS[kind])] for kind in compare.KINDS},
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

"""Strikes, quarantine and the slow lane of installations that time out, wedge or run out of memory."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from plugins_app.models import HandlerWarning, Installation
from plugins_app.services.audit import changes
from plugins_app.services.execution.observers import ChainRun
from plugins_app.services.plugins import chains, strike_book
from plugins_app.services.plugins import installations as plugins

MISBEHAVIOURS = {"timeout": "timed out", "wedged": "wedged its engine", "memory": "ran out of memory"}
MAX_STRIKES_KEPT = 10
REASON_CHARS = 500
RELEASED: dict[str, object] = {"quarantined_until": None, "quarantine_reason": "", "quarantine_warned": False, "strikes": [],
            "slow_lane_until": None, "slow_lane_reason": ""}
STATE_FIELDS = list(RELEASED)


# Hears each installation put in quarantine (the metrics); set by the app's ready().
_on_quarantined: Callable[[], None] | None = None


def configure(*, on_quarantined: Callable[[], None]) -> None:
    global _on_quarantined
    _on_quarantined = on_quarantined


def observe_chain(run: ChainRun) -> None:
    """After a recorded run: strikes for timeouts and engines a handler cost, and a note for each
    handler skipped because it was quarantined."""
    for t in run.result.trace:
        if t.status == "quarantined":
            if t.quarantined_until is not None:   # not for a call held back behind a running one
                note_quarantine_skip(run.account, t.installation_id, run.spec.name, t.plugin,
                                     until=t.quarantined_until)
        elif t.misbehaved:
            if record_misbehaviour(run.account.pk, t.installation_id, t.crash or "timeout", t.warning or ""):
                if _on_quarantined is not None:
                    _on_quarantined()


def _window() -> timedelta:
    return timedelta(seconds=settings.HUB_QUARANTINE.window_seconds)


def _as_pk(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _locked(account_id, installation_id) -> Installation | None:
    """The installation under a row lock (callers are inside transaction.atomic), or None."""
    account_pk, installation_pk = _as_pk(account_id), _as_pk(installation_id)
    if account_pk is None or installation_pk is None:
        return None
    chains.lock_account(account_pk)   # as every writer of the account's installations and chains: first
    return (Installation.objects.select_for_update()
            .filter(pk=installation_pk, account_id=account_pk).first())


def duration_words(seconds: int) -> str:
    if seconds % 60:
        return f"{seconds} seconds"
    minutes = seconds // 60
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


def recent_strikes(strikes, now: datetime) -> list[str]:
    """The strikes (ISO timestamps) within the window that ends at `now`, oldest first."""
    since = now - _window()
    recent = []
    for stamp in strikes or []:
        try:
            if datetime.fromisoformat(stamp) > since:
                recent.append(stamp)
        except (TypeError, ValueError):
            continue
    return recent[-MAX_STRIKES_KEPT:]


def is_quarantined(installation: Installation, now: datetime | None = None) -> bool:
    until = installation.quarantined_until
    return until is not None and until > (now or timezone.now())


def in_slow_lane(installation: Installation, now: datetime | None = None) -> bool:
    until = installation.slow_lane_until
    return until is not None and until > (now or timezone.now())


def run_state(installation: Installation, now: datetime | None = None) -> str:
    """How the installation takes part in its chains now: "disabled", "quarantined" (skipped until its
    cool-down ends), "shadow" (runs after the chain, never applied), "slow lane" or "enabled"."""
    if not installation.enabled:
        return "disabled"
    if is_quarantined(installation, now):
        return "quarantined"
    if installation.mode == "shadow":
        return "shadow"
    return "slow lane" if in_slow_lane(installation, now) else "enabled"


def _quarantine_reason(count: int, kind: str, message: str) -> str:
    window = duration_words(settings.HUB_QUARANTINE.window_seconds)
    reason = f"{count} timeouts/wedges/memory overruns within {window}; the last {MISBEHAVIOURS[kind]}"
    return f"{reason}: {message}"[:REASON_CHARS] if message else reason[:REASON_CHARS]


def _enter_slow_lane(installation: Installation, reason: str, now: datetime) -> bool:
    """Extend the installation's slow lane (unsaved); True when it was not in the lane before."""
    newly = not in_slow_lane(installation, now)
    installation.slow_lane_until = now + timedelta(seconds=settings.HUB_QUARANTINE.slow_lane_seconds)
    installation.slow_lane_reason = (reason or "")[:REASON_CHARS]
    return newly


def _quarantine(installation: Installation, reason: str, now: datetime) -> None:
    installation.quarantined_until = now + timedelta(seconds=settings.HUB_QUARANTINE.seconds)
    installation.quarantine_reason = reason
    installation.quarantine_warned = False
    installation.strikes = []


def record_misbehaviour(account_id, installation_id, kind: str, message: str, *,
                        now: datetime | None = None) -> bool:
    """Count a timeout, wedge or memory overrun; True only when this strike quarantined it."""
    if kind not in MISBEHAVIOURS:
        raise ValueError(f"unknown misbehaviour {kind!r}; expected one of {', '.join(MISBEHAVIOURS)}")
    now = now or timezone.now()
    with transaction.atomic():
        installation = _locked(account_id, installation_id)
        if installation is None:
            return False
        strikes = recent_strikes(installation.strikes, now) + [now.isoformat()]
        installation.strikes = strikes[-MAX_STRIKES_KEPT:]
        # The code's book counts across reinstalls: a tenant reinstalling after each strike gains nothing.
        followed, account_laned = strike_book.strike(installation, kind, now)
        count = max(len(strikes), followed)
        quarantined = count >= settings.HUB_QUARANTINE.strikes
        if quarantined:
            _quarantine(installation, _quarantine_reason(count, kind, message), now)
            strike_book.quarantined(installation, installation.quarantined_until, installation.quarantine_reason)
        newly_slow = _enter_slow_lane(installation, f"{MISBEHAVIOURS[kind]}: {message}", now)
        installation.save(update_fields=[*STATE_FIELDS, "updated_at"])
        if account_laned and installation.slow_lane_until is not None:
            window = duration_words(settings.HUB_QUARANTINE.window_seconds)
            newly_slow |= strike_book.lane_account(
                installation.account_id, installation.slow_lane_until,
                f"the account's plugins cost an engine {settings.HUB_QUARANTINE.strikes} times within {window}") > 0
        if quarantined or newly_slow:
            chains.mark_changed(installation.account_id)
    return quarantined


def mark_slow_lane(account_id, installation_id, reason: str, *, now: datetime | None = None) -> None:
    """Run the installation in the lower-priority lane for HUB_SLOW_LANE_SECONDS from now."""
    now = now or timezone.now()
    with transaction.atomic():
        installation = _locked(account_id, installation_id)
        if installation is None:
            return
        newly = _enter_slow_lane(installation, reason, now)
        installation.save(update_fields=["slow_lane_until", "slow_lane_reason", "updated_at"])
        # Only entering the lane changes how chains run; extending it must not reload every cache.
        if newly:
            chains.mark_changed(installation.account_id)


def _skip_message(installation: Installation) -> str:
    until = timezone.localtime(installation.quarantined_until).isoformat(timespec="seconds")
    return f"quarantined until {until}, skipped without running: {installation.quarantine_reason}"


# (installation, end of its quarantine) this process knows the warning is written for: a
# quarantined plugin's calls keep coming, and each would otherwise cost a query.
_WARNED: set[tuple[int | None, float]] = set()
_WARNED_LIMIT = 10_000


def note_quarantine_skip(account, installation_id, hook: str, plugin_slug: str, *,
                         now: datetime | None = None, until: float | None = None) -> None:
    """Record that a chain skipped a quarantined installation: one warning per cool-down.
    `until` (epoch seconds), the quarantine's end as the caller saw it, lets repeated calls in one
    cool-down skip the database."""
    account_pk, installation_pk = _as_pk(getattr(account, "pk", account)), _as_pk(installation_id)
    if until is not None and (installation_pk, until) in _WARNED:
        return
    _note_quarantine_skip(account_pk, installation_pk, hook, plugin_slug, now)
    if until is not None:
        if len(_WARNED) >= _WARNED_LIMIT:
            _WARNED.clear()
        _WARNED.add((installation_pk, until))


def _note_quarantine_skip(account_pk, installation_pk, hook: str, plugin_slug: str, now) -> None:
    unwarned = Installation.objects.filter(pk=installation_pk, account_id=account_pk,
                                           quarantined_until__gt=now or timezone.now(), quarantine_warned=False)
    # Checked outside a transaction so the common case (already warned) takes no write lock.
    if account_pk is None or installation_pk is None or not unwarned.exists():
        return
    with transaction.atomic():
        # The conditional update lets exactly one of several concurrent processes write the warning.
        if unwarned.update(quarantine_warned=True) != 1:
            return
        installation = Installation.objects.get(pk=installation_pk)
        HandlerWarning.objects.create(account_id=account_pk, hook=hook, installation=installation,
                                      plugin_slug=plugin_slug, kind=HandlerWarning.Kind.QUARANTINED,
                                      message=_skip_message(installation), plugin_version=installation.live_version)


@transaction.atomic
def release(account, installation_id) -> Installation:
    """End the quarantine and slow lane now and forget the strikes; another account's id is NotFound."""
    chains.lock_account(account.pk)
    installation = plugins.get_installation(account, installation_id)
    if is_quarantined(installation) or in_slow_lane(installation) or installation.strikes:
        changes.record(account.pk, changes.ACTIONS.RELEASE, f"released {installation.plugin.slug}",
                       installation=installation, before=status(installation), after={"quarantined": False,
                                                                                      "slowLane": False})
    Installation.objects.filter(pk=installation.pk).update(**RELEASED, updated_at=timezone.now())
    strike_book.forgive(installation)
    chains.mark_changed(installation.account_id)
    installation.refresh_from_db()
    return installation


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def status(installation: Installation, now: datetime | None = None) -> dict:
    """The quarantine and slow-lane state as the API shows it; both end by time alone."""
    now = now or timezone.now()
    quarantined, slow = is_quarantined(installation, now), in_slow_lane(installation, now)
    return {
        "quarantined": quarantined,
        "until": _iso(installation.quarantined_until) if quarantined else None,
        "reason": installation.quarantine_reason if quarantined else "",
        "strikes": len(recent_strikes(installation.strikes, now)),
        "slowLane": slow,
        "slowLaneUntil": _iso(installation.slow_lane_until) if slow else None,
    }

"""Strikes that follow a plugin's code and its account across reinstalls (issue 39, item 2).

An installation's own strikes go with it when it is uninstalled; a tenant that reinstalls the same
bomb after every call would start clean each time. So each strike is also written in the account's
book for that code (its compiled code's hash), and quarantine is decided there; a new installation of
the same code takes over the book's quarantine and lane at once. The account's own book
(`StrikeBook.ACCOUNT_WIDE`) counts strikes that cost an engine (a wedge, a memory overrun) across all
its plugins: an account that keeps costing engines has every installation moved to the lane.
Callers hold the account's lock (`chains.lock_account`), as every writer of its installations does."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from plugins_app.models import Installation, PluginVersion, StrikeBook

# Strike kinds that cost an engine (its isolate's work or memory), as opposed to a handler's own timeout.
ENGINE_COSTS = {"wedged", "memory"}
MAX_KEPT = 10


def code_hash(installation: Installation) -> str:
    """The hash of the code the installation runs: its live version's, or its plugin's."""
    if installation.live_version is not None:
        live = (PluginVersion.objects.filter(installation=installation, number=installation.live_version)
                .values_list("code_hash", flat=True).first())
        if live:
            return live
    return installation.plugin.code_hash


def recent(strikes, now: datetime) -> list[str]:
    since = now - timedelta(seconds=settings.HUB_QUARANTINE.window_seconds)
    kept = []
    for stamp in strikes or []:
        try:
            if datetime.fromisoformat(stamp) > since:
                kept.append(stamp)
        except (TypeError, ValueError):
            continue
    return kept[-MAX_KEPT:]


def _book(account_id: int, key: str) -> StrikeBook:
    book, _ = StrikeBook.objects.select_for_update().get_or_create(account_id=account_id, code_hash=key)
    return book


def strike(installation: Installation, kind: str, now: datetime) -> tuple[int, bool]:
    """Writes a strike in the code's book (and the account's, for one that cost an engine); returns
    the code's recent strikes counted across reinstalls, and whether the account's own book now
    says all its installations belong in the lane."""
    config = settings.HUB_QUARANTINE
    book = _book(installation.account_id, code_hash(installation))
    book.strikes = recent(book.strikes, now) + [now.isoformat()]
    book.slow_lane_until = now + timedelta(seconds=config.slow_lane_seconds)
    book.save()
    account_laned = False
    if kind in ENGINE_COSTS:
        account = _book(installation.account_id, StrikeBook.ACCOUNT_WIDE)
        account.strikes = recent(account.strikes, now) + [now.isoformat()]
        account_laned = len(account.strikes) >= config.strikes
        if account_laned:
            account.slow_lane_until = now + timedelta(seconds=config.slow_lane_seconds)
        account.save()
    return len(book.strikes), account_laned


def quarantined(installation: Installation, until: datetime | None, reason: str) -> None:
    """The code's book keeps the quarantine an installation of it earned."""
    StrikeBook.objects.filter(account_id=installation.account_id, code_hash=code_hash(installation)).update(
        quarantined_until=until, quarantine_reason=reason, strikes=[])


def carry_over(installation: Installation, now: datetime) -> bool:
    """A new installation (or a newly deployed version) takes over what its code's book holds: the
    recent strikes, a quarantine still running, the lane (also the account's lane); True if changed."""
    books = {b.code_hash: b for b in StrikeBook.objects.filter(
        account_id=installation.account_id, code_hash__in=[code_hash(installation), StrikeBook.ACCOUNT_WIDE])}
    account = books.pop(StrikeBook.ACCOUNT_WIDE, None)
    book = next(iter(books.values()), None)
    changed = False
    if book is not None:
        installation.strikes = recent(book.strikes, now)
        if book.quarantined_until is not None and book.quarantined_until > now:
            installation.quarantined_until = book.quarantined_until
            installation.quarantine_reason = book.quarantine_reason
            installation.quarantine_warned = False
        changed = True
    lanes = [b.slow_lane_until for b in (book, account) if b is not None and b.slow_lane_until is not None]
    if lanes and max(lanes) > now:
        installation.slow_lane_until = max(lanes)
        installation.slow_lane_reason = ("its code, installed before, misbehaved recently" if book and
                                         book.slow_lane_until == max(lanes)
                                         else "its account's plugins keep costing engines")
        changed = True
    if changed:
        installation.save(update_fields=["strikes", "quarantined_until", "quarantine_reason", "quarantine_warned",
                                         "slow_lane_until", "slow_lane_reason", "updated_at"])
    return changed


def forgive(installation: Installation) -> None:
    """An admin released the installation: its code's book starts again (the account's is kept)."""
    StrikeBook.objects.filter(account_id=installation.account_id, code_hash=code_hash(installation)).delete()


def lane_account(account_id: int, until: datetime, reason: str) -> int:
    """Every installation of the account runs in the lane until `until`; how many were moved."""
    return (Installation.objects.filter(account_id=account_id)
            .exclude(slow_lane_until__gte=until)
            .update(slow_lane_until=until, slow_lane_reason=reason[:500]))

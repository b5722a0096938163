"""What an account's admin home page shows: its chains, recent cancels and warnings, held plugins, usage."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from django.db.models import Count, Max, Sum
from django.utils import timezone

from plugins_app.models import CancelLog, ChainEntry, HandlerWarning, Installation, UsageDaily
from plugins_app.runtime.tables.hooks import HOOK_NAMES, HOOKS
from plugins_app.services.execution import quarantine

RECENT = 5
USAGE_DAYS = 7
FAILING_WINDOW = datetime.timedelta(hours=24)


@dataclass
class ChainPlace:
    entry: ChainEntry   # with its installation and plugin
    state: str          # quarantine.run_state: "enabled", "disabled", "quarantined", "shadow", "slow lane"


@dataclass
class ChainRow:
    hook: str
    summary: str
    entries: list[ChainPlace] = field(default_factory=list)   # in order


@dataclass
class Overview:
    account: object
    chains: list[ChainRow]
    installed: int
    recent_cancels: list
    recent_warnings: list
    held: list            # (installation, state, until) for those quarantined or in the slow lane now
    failing: list         # (installation, plugin name, warnings in the last 24 h), most first
    usage_days: int
    usage_runs: int
    usage_ms: float
    usage_top: list       # {"plugin_slug", "runs", "total_ms"} for the busiest plugins


def overview(account) -> Overview:
    now = timezone.now()
    by_hook = {name: ChainRow(name, HOOKS[name].summary) for name in HOOK_NAMES}
    entries = (ChainEntry.objects.filter(account=account).select_related("installation__plugin")
               .order_by("hook", "position"))
    for entry in entries:
        by_hook[entry.hook].entries.append(ChainPlace(entry, quarantine.run_state(entry.installation, now)))

    installations = Installation.objects.filter(account=account).select_related("plugin")
    held = []
    for installation in installations:
        if installation.quarantined_until and installation.quarantined_until > now:
            held.append((installation, "quarantined", installation.quarantined_until))
        elif installation.slow_lane_until and installation.slow_lane_until > now:
            held.append((installation, "in the slow lane", installation.slow_lane_until))
    names = {i.pk: i for i in installations}
    failing = []
    for row in (HandlerWarning.objects.filter(account=account, created_at__gte=now - FAILING_WINDOW,
                                              installation__isnull=False)
                .values("installation").annotate(count=Count("id"), last=Max("created_at")).order_by("-count")[:RECENT]):
        if row["installation"] in names:
            failing.append((names[row["installation"]], row["count"], row["last"]))

    since = timezone.localdate() - datetime.timedelta(days=USAGE_DAYS - 1)
    usage = UsageDaily.objects.filter(account=account, day__gte=since)
    totals = usage.aggregate(runs=Sum("runs"), total_ms=Sum("total_ms"))
    top = list(usage.values("plugin_slug").annotate(runs=Sum("runs"), total_ms=Sum("total_ms"))
               .order_by("-runs")[:RECENT])

    return Overview(
        account=account,
        chains=list(by_hook.values()),
        installed=len(names),
        recent_cancels=list(CancelLog.objects.filter(account=account).order_by("-created_at")[:RECENT]),
        recent_warnings=list(HandlerWarning.objects.filter(account=account).order_by("-created_at")[:RECENT]),
        held=held,
        failing=failing,
        usage_days=USAGE_DAYS,
        usage_runs=totals["runs"] or 0,
        usage_ms=totals["total_ms"] or 0.0,
        usage_top=top,
    )

"""host.log: storing what handlers logged, capped per installation, and listing it."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from plugins_app.errors import InvalidInput
from plugins_app.models import Installation, PluginLog
from plugins_app.services.execution.observers import ChainRun
from plugins_app.services.hooks import require_hook
from plugins_app.services.ids import parse_id

LEVELS = PluginLog.Level.values


def store_logs(run: ChainRun) -> None:
    """An after-chain observer: save each handler's host.log lines, then prune beyond the cap."""
    account, spec, result = run.account, run.spec, run.result
    lines = [(int(t.installation_id), t.plugin, line) for t in result.trace for line in t.logs]
    if not lines:
        return
    # An installation removed while its chain ran keeps no logs (its rows would dangle).
    alive = set(Installation.objects.filter(pk__in={i for i, _, _ in lines}, account=account)
                .values_list("pk", flat=True))
    rows = [PluginLog(account=account, installation_id=inst, plugin_slug=slug, hook=spec.name,
                      level=line.get("level") if line.get("level") in LEVELS else PluginLog.Level.INFO,
                      message=str(line.get("message", "")))
            for inst, slug, line in lines if inst in alive]
    with transaction.atomic():
        PluginLog.objects.bulk_create(rows)
        for inst in alive & {inst for inst, _, _ in lines}:   # the installations of `rows`
            prune(inst)


def prune(installation_id: int, limit: int | None = None) -> int:
    """Delete an installation's oldest lines beyond `limit` (HUB_PLUGIN_LOG_LIMIT); returns how many."""
    limit = settings.HUB_HOST.plugin_log_limit if limit is None else limit
    cutoff = list(PluginLog.objects.filter(installation_id=installation_id).order_by("-id")
                  .values_list("id", flat=True)[limit:limit + 1])
    if not cutoff:
        return 0
    deleted, _ = PluginLog.objects.filter(installation_id=installation_id, id__lte=cutoff[0]).delete()
    return deleted


def logs(account, params) -> QuerySet[PluginLog]:
    """The account's plugin logs, newest first, filtered by installationId, plugin, level, hook."""
    qs = PluginLog.objects.filter(account=account)
    if params.get("installationId"):
        qs = qs.filter(installation_id=parse_id(params["installationId"], "installationId"))
    if params.get("plugin"):
        qs = qs.filter(plugin_slug=params["plugin"])
    if params.get("level"):
        if params["level"] not in LEVELS:
            raise InvalidInput("level", "expected one of " + ", ".join(LEVELS))
        qs = qs.filter(level=params["level"])
    if params.get("hook"):
        require_hook(params["hook"])
        qs = qs.filter(hook=params["hook"])
    return qs.order_by("-created_at", "-id")


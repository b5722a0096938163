"""The admin page that replays a cancel-log entry: the recorded and the replayed outcome side by side."""

from __future__ import annotations

import json

from django.http import Http404
from django.template.response import TemplateResponse

from plugins_app.admin.scoping import admin_account_ids, is_operator
from plugins_app.errors import HubError
from plugins_app.models import CancelLog, Installation, PluginVersion
from plugins_app.services.versions import replay


def replay_view(model_admin, request, object_id):
    """GET shows the entry and a choice of draft; POST replays it. Nothing is written and nothing outside
    the hub is called either way, so auditors may replay too; only an account admin may ask for live reads."""
    entry = model_admin.get_queryset(request).filter(pk=object_id).first() if str(object_id).isdigit() else None
    if entry is None:
        raise Http404("no such cancel-log entry")
    versions = (PluginVersion.objects.filter(installation__account_id=entry.account_id)
                .select_related("installation__plugin").order_by("installation__plugin__name", "-number"))
    # Only versions that hook the entry's point: any other would replay exactly the current chain.
    drafts = [{"value": f"{v.installation_id}:{v.number}", "version": v} for v in versions if entry.hook in v.hooks]
    context = {**model_admin.admin_site.each_context(request), "opts": CancelLog._meta, "entry": entry,
               "title": f"Replay: {entry.hook} cancelled by {entry.plugin_slug}", "drafts": drafts,
               "context_text": json.dumps(entry.context, indent=2, ensure_ascii=False, sort_keys=True),
               "may_read_live": _administers(request, entry.account_id)}
    # ?draft=<installation>:<number> comes from a draft's row on the versions page: it is chosen already.
    context["chosen"] = request.GET.get("draft", "")
    if request.method == "POST":
        chosen = request.POST.get("draft", "")
        installation_id, _, number = chosen.partition(":")
        context["chosen"] = chosen
        try:
            outcome = replay.replay_cancellation(entry.account, entry.pk, installation_id=installation_id or None,
                                                 version=number or None,
                                                 live_reads=context["may_read_live"] and "live_reads" in request.POST)
            context["result"] = replay.as_dict(outcome)
            context["replayed_version"] = _replayed_version(context["result"])
        except HubError as exc:
            context["error"] = str(exc.detail)
    return TemplateResponse(request, "admin/plugins_app/cancellog/replay.html", context)


def _replayed_version(result: dict) -> int | None:
    """The version of the plugin that cancelled the replay: the draft's when it was the draft, else the
    version its installation runs now (both sides of the page name theirs)."""
    cancellation, draft = result["replayed"]["cancellation"], result["draft"]
    if cancellation is None:
        return None
    if draft and str(draft.get("installationId")) == str(cancellation["installationId"]):
        return draft.get("version")
    installation = Installation.objects.filter(pk=cancellation["installationId"]).only("live_version").first()
    return installation.live_version if installation else None


def _administers(request, account_id: int) -> bool:
    return is_operator(request) or account_id in admin_account_ids(request)

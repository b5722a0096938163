"""The admin page that replays a cancel-log entry: the recorded and the replayed outcome side by side."""

from __future__ import annotations

import json

from django.http import Http404
from django.template.response import TemplateResponse

from plugins_app.errors import HubError
from plugins_app.models import CancelLog, PluginVersion
from plugins_app.services.versions import replay


def replay_view(model_admin, request, object_id):
    """GET shows the entry and a choice of draft; POST replays it. Nothing is written either way, so
    auditors may replay too."""
    entry = model_admin.get_queryset(request).filter(pk=object_id).first() if str(object_id).isdigit() else None
    if entry is None:
        raise Http404("no such cancel-log entry")
    drafts = (PluginVersion.objects.filter(installation__account_id=entry.account_id)
              .select_related("installation__plugin").order_by("installation__plugin__name", "-number"))
    context = {**model_admin.admin_site.each_context(request), "opts": CancelLog._meta, "entry": entry,
               "title": f"Replay: {entry.hook} cancelled by {entry.plugin_slug}", "drafts": drafts,
               "context_text": json.dumps(entry.context, indent=2, ensure_ascii=False, sort_keys=True)}
    if request.method == "POST":
        chosen = request.POST.get("draft", "")
        installation_id, _, number = chosen.partition(":")
        context["chosen"] = chosen
        try:
            outcome = replay.replay_cancellation(entry.account, entry.pk, installation_id=installation_id or None,
                                                 version=number or None)
            context["result"] = replay.as_dict(outcome)
        except HubError as exc:
            context["error"] = str(exc.detail)
    return TemplateResponse(request, "admin/plugins_app/cancellog/replay.html", context)

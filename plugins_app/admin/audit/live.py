"""The admin's Live page: an account's handler runs, logs, warnings and cancels as they happen, on the
same stream as `GET /api/v1/tail` (services/observability/tail.py), for the accounts the user sees."""

from __future__ import annotations

import json

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from accounts.models import Account
from plugins_app.admin.scoping import is_operator, member_account_ids
from plugins_app.errors import HubError
from plugins_app.models import Installation
from plugins_app.runtime.protocol import TRACE_STATUSES
from plugins_app.runtime.tables.hooks import HOOK_NAMES
from plugins_app.services.observability import tail
from plugins_app.services.observability.streams import event_stream


def _accounts(request):
    accounts = Account.objects.order_by("name")
    return accounts if is_operator(request) else accounts.filter(pk__in=member_account_ids(request))


def _plugins(accounts) -> dict[int, list[tuple[str, str]]]:
    """Each account's installed plugins as (slug, name): the page's filter takes either, and the stream
    is filtered by slug."""
    found: dict[int, list[tuple[str, str]]] = {a.pk: [] for a in accounts}
    rows = Installation.objects.filter(account__in=accounts).order_by("plugin__name")
    for account_id, slug, name in rows.values_list("account_id", "plugin__slug", "plugin__name"):
        found[account_id].append((slug, name))
    return found


def live_page(modeladmin, request):
    if not modeladmin.has_view_permission(request):
        raise PermissionDenied
    accounts = _accounts(request)
    return TemplateResponse(request, "admin/plugins_app/cancellog/live.html", {
        **modeladmin.admin_site.each_context(request), "opts": modeladmin.opts, "title": "Live",
        "accounts": accounts, "plugins": _plugins(accounts), "hooks": HOOK_NAMES, "statuses": TRACE_STATUSES,
        "stream_url": reverse("admin:plugins_app_cancellog_live_stream")})


# What json.dumps leaves as it is but HTML would read as markup, were the answer ever taken for HTML.
_HTML_SAFE_JSON = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def error_answer(exc: HubError) -> HttpResponse:
    """A stream's refusal as the API's JSON error (never text/html): the message may quote what was asked
    for (an unknown hook, say), so markup in it is escaped as well."""
    body = json.dumps({"error": {"code": exc.default_code,
                                 "message": str(exc.detail), "field": exc.extra.get("field")}})
    response = HttpResponse(body.translate(_HTML_SAFE_JSON), status=exc.status_code,
                            content_type="application/json")
    response["X-Content-Type-Options"] = "nosniff"
    return response


class _Events:
    def __init__(self, stream: tail.TailStream):
        self.stream = stream

    def __iter__(self):
        for event in self.stream:
            yield b": keepalive\n\n" if event is None else f"data: {json.dumps(event)}\n\n".encode()

    def close(self) -> None:
        self.stream.close()


def live_stream(modeladmin, request):
    """Server-Sent Events of one account the user sees (another's id answers 404, as elsewhere)."""
    if not modeladmin.has_view_permission(request):
        raise PermissionDenied
    account = _accounts(request).filter(pk=request.GET.get("account") or 0).first() \
        if (request.GET.get("account") or "").isdigit() else None
    if account is None:
        raise Http404("no such account")
    try:
        stream = tail.open_stream(account.pk, tail.Filters.parse(request.GET))
    except HubError as exc:
        return error_answer(exc)
    return event_stream(request, _Events(stream))

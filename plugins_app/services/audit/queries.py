"""Filtered, account-scoped lists of the audit trail, shared by the API and CSV export."""

from __future__ import annotations

from datetime import UTC, datetime, time

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from plugins_app.errors import InvalidInput
from plugins_app.models import CancelLog, HandlerWarning, UsageDaily
from plugins_app.services.hooks import require_hook

EXPECTED = "expected an ISO 8601 date or date-time, e.g. 2026-12-01 or 2026-12-01T10:00:00Z"


def _moment(name: str, raw: str, end_of_day: bool = False) -> datetime:
    """The moment `raw` names, in UTC; InvalidInput naming `name` for text that is not one, or one the
    database can't compare with (an offset of a day or more, a moment before year 1 or after 9999 in UTC)."""
    try:
        value = parse_datetime(raw)
        if value is None:
            day = parse_date(raw)
            if day is None:
                raise InvalidInput(name, EXPECTED)
            value = datetime.combine(day, time.max if end_of_day else time.min)
        if timezone.is_naive(value):
            value = timezone.make_aware(value, timezone.get_current_timezone())
        return value.astimezone(UTC)
    except (ValueError, OverflowError) as exc:   # parse_* raise ValueError for an impossible date or offset
        raise InvalidInput(name, f"{EXPECTED}, within years 1 to 9999 in UTC: {exc}") from None


def common(qs, params, time_field: str = "created_at", *, hook: bool = True):
    """Filters shared by the audit lists: hook, plugin slug, since and until."""
    if hook and params.get("hook"):
        require_hook(params["hook"])
        qs = qs.filter(hook=params["hook"])
    if params.get("plugin"):
        qs = qs.filter(plugin_slug=params["plugin"])
    if params.get("since"):
        since = _moment("since", params["since"])
        qs = qs.filter(**{f"{time_field}__gte": since.date() if time_field == "day" else since})
    if params.get("until"):
        until = _moment("until", params["until"], end_of_day=True)
        qs = qs.filter(**{f"{time_field}__lte": until.date() if time_field == "day" else until})
    return qs


def cancellations(account, params) -> QuerySet[CancelLog]:
    qs = common(CancelLog.objects.filter(account=account), params)
    if params.get("agentId"):
        qs = qs.filter(agent_id=params["agentId"])
    if params.get("sessionId"):
        qs = qs.filter(session_id=params["sessionId"])
    if params.get("q"):
        qs = qs.filter(reason__icontains=params["q"])
    return qs.order_by("-created_at", "-id")


def warnings(account, params) -> QuerySet[HandlerWarning]:
    qs = common(HandlerWarning.objects.filter(account=account), params)
    if params.get("kind"):
        if params["kind"] not in HandlerWarning.Kind.values:
            raise InvalidInput("kind", "expected one of " + ", ".join(HandlerWarning.Kind.values))
        qs = qs.filter(kind=params["kind"])
    return qs.order_by("-created_at", "-id")


def usage(account, params) -> QuerySet[UsageDaily]:
    """Daily handler runs and time; `since`/`until` select days."""
    return common(UsageDaily.objects.filter(account=account), params, time_field="day").order_by(
        "-day", "plugin_slug", "hook")

"""The audit lists: cancellations, handler warnings and usage, paginated and filtered."""

from drf_spectacular.utils import OpenApiParameter, extend_schema

from plugins_app.api.audit import serializers as s
from plugins_app.api.base import AuditListView
from plugins_app.services.audit import queries

_FILTERS = [
    OpenApiParameter(name, str, description=desc) for name, desc in (
        ("hook", "only this hook"), ("plugin", "only this plugin slug"),
        ("since", "ISO date or date-time"), ("until", "ISO date or date-time"))
]


@extend_schema(parameters=_FILTERS + [OpenApiParameter("agentId", str), OpenApiParameter("sessionId", str),
                                      OpenApiParameter("q", str, description="search in the reason")])
class CancellationListView(AuditListView):
    serializer_class = s.CancelLogSerializer
    query = staticmethod(queries.cancellations)


@extend_schema(parameters=_FILTERS + [OpenApiParameter("kind", str)])
class WarningListView(AuditListView):
    serializer_class = s.HandlerWarningSerializer
    query = staticmethod(queries.warnings)


@extend_schema(parameters=_FILTERS)
class UsageListView(AuditListView):
    """Handler runs and time per plugin per hook per day (only handlers that actually ran)."""

    serializer_class = s.UsageSerializer
    query = staticmethod(queries.usage)

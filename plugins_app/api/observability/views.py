"""Endpoints for operators' tools: /healthz, /readyz (load balancers) and /metrics (Prometheus)."""

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from plugins_app.services.observability import health, metrics

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _OpenView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]


@extend_schema(exclude=True)
class HealthView(_OpenView):
    """The process is up and serving requests; checks nothing else."""

    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})


@extend_schema(exclude=True)
class ReadyView(_OpenView):
    """200 when the database, the engines and the broker all answer; 503 naming what does not."""

    def get(self, request: Request) -> Response:
        ready, checks = health.readiness()
        return Response({"status": "ready" if ready else "not ready", "checks": checks}, status=200 if ready else 503)


class PrometheusRenderer(BaseRenderer):
    media_type = "text/plain"
    format = "prometheus"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Mapping[str, Any] | None = None) -> Any:
        return data


class MayScrape(BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        allowed, why = metrics.may_scrape(request.META.get("HTTP_AUTHORIZATION", ""),
                                          request.META.get("REMOTE_ADDR", ""))
        if not allowed:
            raise (exceptions.NotAuthenticated if request.META.get("HTTP_AUTHORIZATION") or metrics.token_set()
                   else exceptions.PermissionDenied)(why)
        return True


@extend_schema(exclude=True)
class MetricsView(APIView):
    authentication_classes: list = []
    permission_classes = [MayScrape]
    renderer_classes = [PrometheusRenderer]

    def get_authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="metrics"'

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        # An error keeps the API's one JSON error shape, whatever a scraper accepts.
        self.request.accepted_renderer, self.request.accepted_media_type = JSONRenderer(), "application/json"
        return response

    def get(self, request: Request) -> Response:
        return Response(metrics.scrape(), content_type=METRICS_CONTENT_TYPE)

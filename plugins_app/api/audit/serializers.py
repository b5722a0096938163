"""Shapes of the audit lists: the cancel log, handler warnings and daily usage."""

from typing import Any, cast

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from plugins_app.api.base import StrIdField
from plugins_app.api.execution.serializers import SourcePositionSerializer
from plugins_app.models import CancelLog, HandlerWarning, UsageDaily
from plugins_app.runtime import positions
from plugins_app.runtime.protocol import TRACE_STATUSES
from plugins_app.services.observability import latency


class CancelLogSerializer(serializers.ModelSerializer):
    id = StrIdField(source="pk")
    installationId = StrIdField(source="installation_id")
    plugin = serializers.CharField(source="plugin_slug")
    sessionId = serializers.CharField(source="session_id")
    agentId = serializers.CharField(source="agent_id")
    turnId = serializers.CharField(source="turn_id")
    pluginVersion = serializers.IntegerField(source="plugin_version", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = CancelLog
        fields = ["id", "hook", "installationId", "plugin", "pluginVersion", "reason", "context", "sessionId",
                  "agentId", "hop", "turnId", "createdAt"]


class HandlerWarningSerializer(serializers.ModelSerializer):
    id = StrIdField(source="pk")
    installationId = StrIdField(source="installation_id")
    plugin = serializers.CharField(source="plugin_slug")
    pluginVersion = serializers.IntegerField(source="plugin_version", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    at = serializers.SerializerMethodField(help_text="{line, column} in the author's source (handler: true when it "
                                                     "is where the handler is assigned), as the message ends")

    class Meta:
        model = HandlerWarning
        fields = ["id", "hook", "installationId", "plugin", "pluginVersion", "kind", "message", "at", "createdAt"]

    @extend_schema_field(SourcePositionSerializer(allow_null=True))
    def get_at(self, obj) -> dict | None:
        return positions.read_back(obj.message)


class _UsageListSerializer(serializers.ListSerializer):
    """Reads the page's latency histograms in one query, not one per row."""

    def to_representation(self, data: Any) -> list[Any]:
        rows = list(data.all() if hasattr(data, "all") else data)
        cast(UsageSerializer, self.child).summaries = latency.day_summaries(rows)
        return super().to_representation(rows)


class UsageSerializer(serializers.ModelSerializer):
    plugin = serializers.CharField(source="plugin_slug")
    totalMs = serializers.FloatField(source="total_ms")
    averageMs = serializers.SerializerMethodField()
    p50Ms = serializers.SerializerMethodField()
    p95Ms = serializers.SerializerMethodField()
    p99Ms = serializers.SerializerMethodField()
    maxMs = serializers.SerializerMethodField()
    statusCounts = serializers.SerializerMethodField()
    kvReads = serializers.IntegerField(source="kv_reads", help_text="host.kv get and list calls")
    kvWrites = serializers.IntegerField(source="kv_writes", help_text="host.kv put, delete and incr calls")
    summaries: dict = {}   # filled per page by _UsageListSerializer

    class Meta:
        model = UsageDaily
        fields = ["day", "plugin", "hook", "runs", "skipped", "totalMs", "averageMs", "p50Ms", "p95Ms", "p99Ms",
                  "maxMs", "statusCounts", "kvReads", "kvWrites"]
        extra_kwargs = {"skipped": {"help_text": "calls where the plugin's matcher left its handler out (not runs, "
                                                 "not metered)"}}
        list_serializer_class = _UsageListSerializer

    def _summary(self, row) -> dict:
        return self.summaries.get((row.account_id, row.plugin_slug, row.hook, row.day), latency.EMPTY_SUMMARY)

    def get_averageMs(self, row) -> float:
        return round(row.total_ms / row.runs, 3) if row.runs else 0.0

    def get_p50Ms(self, row) -> float | None:
        return self._summary(row)["p50Ms"]

    def get_p95Ms(self, row) -> float | None:
        return self._summary(row)["p95Ms"]

    def get_p99Ms(self, row) -> float | None:
        return self._summary(row)["p99Ms"]

    def get_maxMs(self, row) -> float | None:
        return self._summary(row)["maxMs"]

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "integer"},
                          "description": "handler runs per status: " + ", ".join(TRACE_STATUSES)})
    def get_statusCounts(self, row) -> dict:
        return self._summary(row)["statusCounts"]

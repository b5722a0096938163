"""Request and response shapes of the API; ids leave the hub as strings."""

from django.core.exceptions import FieldDoesNotExist
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from plugins_app.models import CancelLog, ChainEntry, HandlerWarning, Installation, UsageDaily
from plugins_app.runtime import positions
from plugins_app.runtime.web.chain import ChainResult
from plugins_app.services.execution import quarantine
from plugins_app.services.observability import latency


@extend_schema_field(OpenApiTypes.STR)
class StrIdField(serializers.Field):
    """An id as a string; null (and documented as nullable) when its model field may be null, as an
    uninstalled plugin's installation in the change log or the cancel log."""

    def bind(self, field_name, parent):
        super().bind(field_name, parent)
        model = getattr(getattr(parent, "Meta", None), "model", None)
        name = self.source.removesuffix("_id")
        if model is not None and "." not in name:
            try:
                self.allow_null = model._meta.get_field(name).null
            except FieldDoesNotExist:   # "pk" and other names that are no field
                pass

    def to_representation(self, value):
        return None if value is None else str(value)


# Two findings of the DRF stubs, silenced where they stand:
# - a declared field named like a Field attribute (`context`, `source`): the stubs see it override that
#   attribute, but DRF's serializer metaclass takes declared fields out of the class's attributes;
# - a JSONField's default: the stubs accept only a mapping, DRF any JSON value.
class ExecuteRequestSerializer(serializers.Serializer):
    context = serializers.JSONField()  # type: ignore[assignment]  # a field, not Field.context (see above)
    hop = serializers.JSONField(required=False, default=0)  # type: ignore[arg-type]  # any JSON default
    turnId = serializers.JSONField(required=False, default="")  # type: ignore[arg-type]  # any JSON default
    conversation = serializers.JSONField(required=False, help_text="the conversation so far, for "
                                                                   "host.session.conversation.read")


class TraceEntrySerializer(serializers.Serializer):
    installationId = serializers.CharField()
    plugin = serializers.CharField()
    status = serializers.ChoiceField(choices=[
        ("ran", "it ran and answered"), ("cancelled", "it cancelled the action"),
        ("error", "it threw or failed to load; skipped (fail-open)"),
        ("timeout", "it ran past its time budget; skipped"),
        ("malformed", "it returned a value of the wrong shape; skipped"),
        ("quarantined", "it is in quarantine after repeated timeouts; not run")])
    changed = serializers.BooleanField()
    durationMs = serializers.FloatField()
    warning = serializers.CharField(allow_null=True)


class SourcePositionSerializer(serializers.Serializer):
    line = serializers.IntegerField()
    column = serializers.IntegerField()
    source = serializers.CharField(  # type: ignore[assignment]  # a field, not Field.source
        required=False, help_text="the file, when a bundle's own source map names one")
    handler = serializers.BooleanField(required=False, help_text="true: where the handler is assigned (a timeout "
                                                                 "or a malformed result has no line of its own)")


class TryRequestSerializer(serializers.Serializer):
    context = serializers.JSONField()  # type: ignore[assignment]  # a field, not Field.context
    versions = serializers.JSONField(
        required=False, default=None,
        help_text='{"<installationId>": <version number>}: run these versions (drafts) in place of live code')


class TryStepSerializer(serializers.Serializer):
    installationId = serializers.CharField()
    plugin = serializers.CharField()
    # Plain strings here: the same choices as the execute trace's, named once in the schema (there).
    status = serializers.CharField(help_text="as in the execute trace: ran, cancelled, error, timeout, ...")
    changed = serializers.BooleanField()
    durationMs = serializers.FloatField()
    warning = serializers.CharField(allow_null=True)
    version = serializers.IntegerField(allow_null=True, help_text="the version that ran")
    before = serializers.JSONField(help_text="the hook's value before this handler")
    after = serializers.JSONField(help_text="the hook's value after it")
    at = SourcePositionSerializer(allow_null=True, help_text="where in the author's source it failed")
    logs = serializers.ListField(child=serializers.DictField())


class TryResponseSerializer(serializers.Serializer):
    hook = serializers.CharField()
    outcome = serializers.CharField(help_text="unchanged, changed or cancelled")
    value = serializers.JSONField()
    versions = serializers.DictField(child=serializers.IntegerField(), help_text="the versions swapped in")
    cancellation = serializers.DictField(allow_null=True)
    trace = TryStepSerializer(many=True)
    effects = serializers.ListField(child=serializers.DictField())


class CancellationSerializer(serializers.Serializer):
    installationId = serializers.CharField()
    plugin = serializers.CharField()
    reason = serializers.CharField()


class ExecuteResponseSerializer(serializers.Serializer):
    hook = serializers.CharField()
    # Labels say what each outcome means: the docs list each choice with its label.
    outcome = serializers.ChoiceField(choices=[
        ("unchanged", "no handler changed the value: go on with the original"),
        ("changed", "the value was changed: go on with `value`"),
        ("cancelled", "a handler cancelled: do not go on (see `cancellation`)")])
    value = serializers.JSONField(help_text="the hook's mutable value(s) after the chain; null for observe-only")
    cancellation = CancellationSerializer(allow_null=True)
    trace = TraceEntrySerializer(many=True)
    effects = serializers.ListField(child=serializers.DictField())


class OrderRequestSerializer(serializers.Serializer):
    order = serializers.ListField(child=serializers.CharField(), required=False)
    installationId = serializers.CharField(required=False)
    position = serializers.IntegerField(required=False, min_value=0)


class InstallRequestSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False)
    source = serializers.CharField(trim_whitespace=False, required=False)  # type: ignore[assignment]  # not Field.source
    language = serializers.ChoiceField(choices=["typescript", "javascript"], default="typescript")
    description = serializers.CharField(required=False, allow_blank=True, default="")
    grant = serializers.ListField(child=serializers.CharField(), required=False)
    catalog = serializers.CharField(required=False)
    settings = serializers.DictField(required=False)
    typecheck = serializers.BooleanField(
        required=False, default=False,
        help_text="type-check a TypeScript source against GET /sdk/middleware.d.ts; 400 type_error with "
                  "errors [{message, line, column}] when it does not")

    def validate(self, attrs):
        if "catalog" not in attrs and ("name" not in attrs or "source" not in attrs):
            raise serializers.ValidationError({"source": "give name and source, or catalog"})
        if "settings" in attrs and "catalog" not in attrs:
            raise serializers.ValidationError({"settings": "only official (catalog) plugins take settings"})
        return attrs


class QuarantineStatusSerializer(serializers.Serializer):
    quarantined = serializers.BooleanField(help_text="skipped without running until `until`")
    until = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    strikes = serializers.IntegerField(help_text="timeouts, wedges and memory overruns within the window")
    slowLane = serializers.BooleanField(help_text="runs in the lower-priority lane until `slowLaneUntil`")
    slowLaneUntil = serializers.DateTimeField(allow_null=True)


class InstallationSerializer(serializers.ModelSerializer):
    id = StrIdField(source="pk")
    installationId = StrIdField(source="pk")
    pluginId = StrIdField(source="plugin_id")
    plugin = serializers.CharField(source="plugin.slug")
    name = serializers.CharField(source="plugin.name")
    description = serializers.CharField(source="plugin.description")
    language = serializers.CharField(source="plugin.language")
    version = serializers.CharField(source="plugin.version")
    liveVersion = serializers.IntegerField(source="live_version", allow_null=True,
                                           help_text="the number of the deployed version (GET .../versions)")
    shadowVersion = serializers.IntegerField(source="shadow_version", allow_null=True,
                                             help_text="a draft running in shadow next to the live code")
    official = serializers.BooleanField(source="plugin.is_official")
    hooks = serializers.JSONField(source="plugin.hooks")
    hostMembers = serializers.JSONField(source="plugin.host_members")
    permissions = serializers.JSONField(source="plugin.permissions")
    granted = serializers.JSONField(source="granted_permissions")
    createdAt = serializers.DateTimeField(source="created_at")
    quarantine = serializers.SerializerMethodField()

    class Meta:
        model = Installation
        fields = ["id", "installationId", "pluginId", "plugin", "name", "description", "language",
                  "version", "liveVersion", "mode", "shadowVersion", "official", "enabled", "hooks", "hostMembers", "permissions", "granted",
                  "settings", "createdAt", "quarantine"]

    @extend_schema_field(QuarantineStatusSerializer)
    def get_quarantine(self, installation) -> dict:
        return quarantine.status(installation)


class ChainEntrySerializer(serializers.ModelSerializer):
    installationId = StrIdField(source="installation_id")
    plugin = serializers.CharField(source="installation.plugin.slug")
    enabled = serializers.BooleanField(source="installation.enabled")

    class Meta:
        model = ChainEntry
        fields = ["installationId", "plugin", "position", "enabled"]


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


def execute_response(result: ChainResult, effects: list) -> dict:
    c = result.cancellation
    return {
        "hook": result.hook,
        "outcome": result.outcome,
        "value": result.value,
        "cancellation": None if c is None else {
            "installationId": c.installation_id, "plugin": c.plugin, "reason": c.reason},
        "trace": [{
            "installationId": t.installation_id, "plugin": t.plugin, "status": t.status,
            "changed": t.changed, "durationMs": t.duration_ms, "warning": t.warning,
        } for t in result.trace],
        "effects": effects,
    }


def try_response(run) -> dict:
    """A try-run (services/execution/tryit.py's TryRun) as the try API answers it."""
    return {
        "hook": run.hook,
        "outcome": run.outcome,
        "value": run.after,
        "versions": run.versions,
        "cancellation": None if run.cancelled_by is None else {"plugin": run.cancelled_by, "reason": run.cancel_reason},
        "trace": [{
            "installationId": step.trace.installation_id, "plugin": step.trace.plugin, "status": step.trace.status,
            "changed": step.trace.changed, "durationMs": step.trace.duration_ms, "warning": step.trace.warning,
            "version": step.version, "before": step.before, "after": step.after, "at": step.trace.at,
            "logs": step.trace.logs,
        } for step in run.steps],
        "effects": run.effects,
    }


class _UsageListSerializer(serializers.ListSerializer):
    """Reads the page's latency histograms in one query, not one per row."""

    def to_representation(self, data):
        rows = list(data.all() if hasattr(data, "all") else data)
        self.child.summaries = latency.day_summaries(rows)
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
    summaries: dict = {}   # filled per page by _UsageListSerializer

    class Meta:
        model = UsageDaily
        fields = ["day", "plugin", "hook", "runs", "totalMs", "averageMs", "p50Ms", "p95Ms", "p99Ms", "maxMs",
                  "statusCounts"]
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
                          "description": "handler runs per status: " + ", ".join(latency.STATUSES)})
    def get_statusCounts(self, row) -> dict:
        return self._summary(row)["statusCounts"]

"""Request and response shapes of installations and chains; ids leave the hub as strings."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from plugins_app.api.base import StrIdField
from plugins_app.models import ChainEntry, Installation
from plugins_app.services.execution import quarantine


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
    enabled = serializers.BooleanField(
        required=False, default=True,
        help_text="false installs your own plugin disabled: it takes its chain places but runs nowhere until "
                  "PATCH {\"enabled\": true} (`hub push` without --deploy sends false)")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "catalog" in attrs and attrs.get("enabled") is False:
            raise serializers.ValidationError({"enabled": "an official plugin installs enabled; disable it afterwards"})
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

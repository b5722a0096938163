"""Shapes of versions, deploys, the change log and replays in the API."""

from rest_framework import serializers

from plugins_app.api.base import StrIdField
from plugins_app.models import AccountChange, PluginVersion, RecordedCall


class VersionSerializer(serializers.ModelSerializer):
    installationId = StrIdField(source="installation_id")
    codeHash = serializers.CharField(source="code_hash")
    hostMembers = serializers.JSONField(source="host_members")
    createdBy = serializers.CharField(source="created_by_name")
    createdAt = serializers.DateTimeField(source="created_at")
    live = serializers.SerializerMethodField()
    notGranted = serializers.SerializerMethodField(help_text="permissions it asks for that are not granted")

    class Meta:
        model = PluginVersion
        fields = ["number", "installationId", "live", "language", "codeHash", "hooks", "hostMembers", "permissions",
                  "notGranted", "note", "createdBy", "createdAt", "source"]

    def get_live(self, version) -> bool:
        return version.installation.live_version == version.number

    def get_notGranted(self, version) -> list[str]:
        return sorted(set(version.permissions) - set(version.installation.granted_permissions or ()))


class DraftRequestSerializer(serializers.Serializer):
    # The DRF stubs see Field.source overridden, but the serializer metaclass takes declared fields out
    # of the class's attributes.
    source = serializers.CharField(trim_whitespace=False)  # type: ignore[assignment]
    language = serializers.ChoiceField(choices=["typescript", "javascript"], required=False)
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)
    typecheck = serializers.BooleanField(
        required=False, default=False,
        help_text="type-check a TypeScript source against GET /sdk/middleware.d.ts; 400 type_error with "
                  "errors [{message, line, column}] when it does not")


class DeployRequestSerializer(serializers.Serializer):
    grant = serializers.ListField(child=serializers.CharField(), required=False,
                                  help_text="permissions the version asks for, granted with the deploy")
    check = serializers.JSONField(required=False, help_text="check the version against this many recorded "
                                                            "calls first (1 to 1000); the answer carries it")
    maxDifferent = serializers.JSONField(
        required=False, help_text="refuse the deploy (409 check_failed, nothing deployed) when more than this "
                                  "percentage of the checked calls are not the same; checks 200 calls unless "
                                  "`check` says how many")


class CheckRequestSerializer(serializers.Serializer):
    version = serializers.JSONField(help_text="the version to check (a draft, or any other)")
    calls = serializers.JSONField(required=False, help_text="how many recorded calls, newest first (1 to 1000; "
                                                            "default 200)")


class RecordedReplayRequestSerializer(serializers.Serializer):
    installationId = serializers.CharField(required=False, help_text="run this installation's `version` instead "
                                                                     "of its live code")
    version = serializers.CharField(required=False)


class RecordedCallSerializer(serializers.ModelSerializer):
    id = StrIdField(source="pk")
    turnId = serializers.CharField(source="turn_id")
    cancelledBy = serializers.CharField(source="cancelled_by")
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = RecordedCall
        fields = ["id", "hook", "context", "hop", "turnId", "versions", "outcome", "value", "cancelledBy", "reason",
                  "createdAt"]


class ChangeSerializer(serializers.ModelSerializer):
    id = StrIdField(source="pk")
    installationId = StrIdField(source="installation_id")
    plugin = serializers.CharField(source="plugin_slug")
    actor = serializers.CharField(source="actor_name")
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = AccountChange
        fields = ["id", "action", "installationId", "plugin", "actor", "summary", "before", "after", "createdAt"]


class ReplayRequestSerializer(serializers.Serializer):
    installationId = serializers.CharField(required=False, help_text="run this installation's `version` instead "
                                                                     "of its live code")
    version = serializers.CharField(required=False)
    liveReads = serializers.BooleanField(
        required=False, default=False,
        help_text="make the plugins' plain GET/HEAD fetches for real (no body, no method override); every "
                  "other outward call (fetches that send, llm, decide, the platform, SSH) is still answered "
                  "by a stand-in and listed in wouldCall")

"""Request and response shapes of the SSH API; a private key is accepted, never returned."""

from typing import Any

from rest_framework import serializers

from plugins_app.api.base import StrIdField
from plugins_app.api.execution.serializers import (
    CancellationSerializer,
    ExecuteResponseSerializer,
    execute_response,
)
from plugins_app.models import SshHost
from plugins_app.runtime.tables.hooks import SSH_KINDS
from plugins_app.services.ssh.gateway import GatewayResult


class SshHostWriteSerializer(serializers.Serializer):
    """Types only; the service checks what goes with what (ports, jump hosts, keys)."""

    displayName = serializers.CharField(source="display_name", required=False)
    hostname = serializers.CharField(required=False)
    port = serializers.IntegerField(required=False, allow_null=True)
    connectionType = serializers.ChoiceField(source="connection_type", choices=SshHost.ConnectionType.values,
                                             required=False)
    jumpHostId = serializers.CharField(source="jump_host_id", required=False, allow_null=True)
    tunnelPort = serializers.IntegerField(source="tunnel_port", required=False, allow_null=True)
    username = serializers.CharField(required=False)
    privateKey = serializers.CharField(source="private_key", required=False, write_only=True,
                                       trim_whitespace=False, help_text="Write-only: never returned.")
    hostKey = serializers.CharField(source="host_key", required=False,
                                    help_text="The server's OpenSSH public key line, pinned.")


class SshHostSerializer(serializers.ModelSerializer):
    id = StrIdField(source="pk")
    displayName = serializers.CharField(source="display_name")
    connectionType = serializers.CharField(source="connection_type")
    jumpHostId = StrIdField(source="jump_host_id")
    tunnelPort = serializers.IntegerField(source="tunnel_port")
    hostKey = serializers.CharField(source="host_key")
    hostKeyFingerprint = serializers.CharField(source="host_key_fingerprint")
    publicKey = serializers.CharField(source="public_key",
                                      help_text="Put this in the server's authorized_keys.")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    class Meta:
        model = SshHost
        fields = ["id", "displayName", "hostname", "port", "connectionType", "jumpHostId", "tunnelPort",
                  "username", "hostKey", "hostKeyFingerprint", "publicKey", "createdAt", "updatedAt"]


class IdField(serializers.CharField):
    """Ids are strings: 64-bit numbers do not survive JSON numbers."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=64, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("expected an id string")
        return super().to_internal_value(data)


class SshExecuteRequestSerializer(serializers.Serializer):
    sessionId = IdField()
    agentId = IdField()
    sshHostId = IdField()
    turnId = IdField(help_text="sshConnectionOpening fires once per server per turn.")
    kind = serializers.ChoiceField(choices=SSH_KINDS)
    command = serializers.CharField(required=False, allow_null=True, default=None, trim_whitespace=False)
    path = serializers.CharField(required=False, allow_null=True, default=None, trim_whitespace=False)
    content = serializers.CharField(required=False, allow_null=True, default=None, allow_blank=True,
                                    trim_whitespace=False)
    intent = serializers.CharField(required=False, allow_null=True, default=None, allow_blank=True)


class SshResultSerializer(serializers.Serializer):
    exitCode = serializers.IntegerField()
    output = serializers.CharField(allow_null=True)
    errorOutput = serializers.CharField(allow_null=True)
    isTruncated = serializers.BooleanField()
    durationMs = serializers.FloatField()
    timedOut = serializers.BooleanField()


class SshCancellationSerializer(CancellationSerializer):
    hook = serializers.CharField()
    earlier = serializers.BooleanField(required=False, help_text="refused by this turn's sshConnectionOpening")


class SshOperationSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=SSH_KINDS)
    command = serializers.CharField(allow_null=True)
    path = serializers.CharField(allow_null=True)


class SshExecuteResponseSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=["completed", "cancelled", "withheld"])
    ran = serializers.BooleanField(help_text="whether the operation ran on the server")
    withheld = serializers.BooleanField(help_text="it ran, but sshCommandCompleted withheld the result")
    operation = SshOperationSerializer(help_text="as sshCommandSending left it")
    result = SshResultSerializer(allow_null=True)
    cancellation = SshCancellationSerializer(allow_null=True)
    hooks = serializers.DictField(child=ExecuteResponseSerializer(), help_text="the hooks that fired, by name")


def gateway_response(g: GatewayResult) -> dict:
    op = g.operation
    return {
        "outcome": g.outcome,
        "ran": g.ran,
        "withheld": g.outcome == "withheld",
        "operation": {"kind": op.kind, "command": op.command, "path": op.path},
        "result": None if g.result is None else {**g.result.as_dict(), "timedOut": g.result.timed_out},
        "cancellation": g.cancellation,
        "hooks": {name: execute_response(result, effects) for name, (result, effects) in g.hooks.items()},
    }

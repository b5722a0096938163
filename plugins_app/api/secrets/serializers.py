"""Request and response shapes of the secrets API: a value is accepted, never returned."""

from rest_framework import serializers

from plugins_app.models import Secret
from plugins_app.services.secrets.hosts import MAX_HOSTS
from plugins_app.services.secrets.store import MAX_DESCRIPTION, MIN_VALUE_CHARS


class SecretWriteSerializer(serializers.Serializer):
    """Documents the body and refuses unknown fields; the service checks the values (one error shape)."""

    value = serializers.CharField(required=False, write_only=True, trim_whitespace=False, min_length=MIN_VALUE_CHARS,
                                  help_text="Write-only: never returned. Up to 8 KiB; required for a new secret, "
                                            "left out to keep the stored value.")
    allowedHosts = serializers.ListField(child=serializers.CharField(), required=False, min_length=1,
                                         max_length=MAX_HOSTS,
                                         help_text="Hosts host.fetch may send it to: api.example.com, an address, "
                                                   "or *.example.com for subdomains. Required for a new secret.")
    description = serializers.CharField(required=False, allow_blank=True, max_length=MAX_DESCRIPTION)


class SecretSerializer(serializers.ModelSerializer):
    allowedHosts = serializers.JSONField(source="allowed_hosts")
    setBy = serializers.CharField(source="set_by", help_text="Who last set the value.")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    class Meta:
        model = Secret
        fields = ["name", "allowedHosts", "description", "setBy", "createdAt", "updatedAt"]

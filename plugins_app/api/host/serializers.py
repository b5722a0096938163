"""Response shapes of the host surface's API; ids leave the hub as strings."""

from rest_framework import serializers

from plugins_app.api.base import StrIdField
from plugins_app.models import Agent, PluginLog


class PluginLogSerializer(serializers.ModelSerializer):
    id = StrIdField(source="pk")
    installationId = StrIdField(source="installation_id")
    plugin = serializers.CharField(source="plugin_slug")
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = PluginLog
        fields = ["id", "installationId", "plugin", "hook", "level", "message", "createdAt"]


class AgentSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="agent_id")
    plugin = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    class Meta:
        model = Agent
        fields = ["id", "name", "plugin", "createdAt", "updatedAt"]

    def get_plugin(self, agent) -> str | None:
        return agent.plugin.slug if agent.plugin_id else None

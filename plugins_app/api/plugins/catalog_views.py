"""The official plugin catalog and per-installation settings."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from plugins_app.api.base import AccountView
from plugins_app.api.dry_run import rehearsable
from plugins_app.api.edge import body, body_field
from plugins_app.api.plugins.serializers import InstallationSerializer
from plugins_app.services.plugins import catalog


class CatalogPluginSerializer(serializers.Serializer):
    """An official plugin; context["installed"] maps plugin ids to this account's installations."""

    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    version = serializers.CharField()
    hooks = serializers.JSONField()
    hostMembers = serializers.JSONField(source="host_members")
    permissions = serializers.JSONField()
    settings = serializers.JSONField(source="settings_schema")
    installed = serializers.SerializerMethodField()
    installationId = serializers.SerializerMethodField()

    def get_installed(self, plugin) -> bool:
        return plugin.pk in self.context["installed"]

    def get_installationId(self, plugin) -> str | None:
        installation_id = self.context["installed"].get(plugin.pk)
        return None if installation_id is None else str(installation_id)


class CatalogView(AccountView):
    @extend_schema(responses=inline_serializer("Catalog", {"plugins": CatalogPluginSerializer(many=True)}))
    def get(self, request: Request) -> Response:
        official, installed = catalog.catalog(self.account)
        data = CatalogPluginSerializer(official, many=True, context={"installed": installed}).data
        return Response({"plugins": data})


class PluginSettingsView(AccountView):
    @rehearsable
    @body(inline_serializer("SettingsPatch", {"settings": serializers.DictField()}),
          responses=InstallationSerializer)
    def patch(self, request: Request, installation_id: str) -> Response:
        value = body_field(request, "settings", 'send {"settings": {"name": value, ...}}')
        installation = catalog.update_settings(self.account, installation_id, value)
        return Response(InstallationSerializer(installation).data)

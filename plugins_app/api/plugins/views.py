"""Installations and chains: install, read, enable, grant, release, uninstall, reorder."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers as drf_serializers
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from plugins_app.api.base import AccountView, validated
from plugins_app.api.dry_run import rehearsable
from plugins_app.api.edge import body, body_field
from plugins_app.api.plugins import serializers as s
from plugins_app.errors import InvalidInput
from plugins_app.models import Installation
from plugins_app.services.execution import quarantine
from plugins_app.services.plugins import catalog, chains
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.versions import shadow

_PLUGIN_LIST = inline_serializer("PluginList", {"plugins": s.InstallationSerializer(many=True)})


class PluginListView(AccountView):
    max_body_bytes = plugins.MAX_INSTALL_BODY_BYTES   # a bundled plugin's source; other bodies stay at 1 MiB
    @extend_schema(responses=_PLUGIN_LIST, operation_id="plugins_list")
    def get(self, request: Request) -> Response:
        qs = Installation.objects.filter(account=self.account).select_related("plugin").order_by("created_at", "id")
        return Response({"plugins": s.InstallationSerializer(qs, many=True).data})

    @rehearsable
    @body(s.InstallRequestSerializer, responses={201: s.InstallationSerializer})
    def post(self, request: Request) -> Response:
        body = validated(s.InstallRequestSerializer, request.data)
        if "catalog" in body:
            installation = catalog.install_official(self.account, body["catalog"], settings=body.get("settings"),
                                                    grant=body.get("grant"))
        else:
            installation = plugins.install_plugin(
                self.account, name=body["name"], source=body["source"], language=body["language"],
                description=body["description"], grant=body.get("grant"), typecheck=body["typecheck"],
                enabled=body["enabled"])
        return Response(s.InstallationSerializer(installation).data, status=status.HTTP_201_CREATED)


@extend_schema(responses=s.InstallationSerializer)
class PluginDetailView(AccountView):
    def get(self, request: Request, installation_id: str) -> Response:
        return Response(s.InstallationSerializer(plugins.get_installation(self.account, installation_id)).data)

    @rehearsable
    @body(inline_serializer("PluginPatch", {
        "enabled": drf_serializers.BooleanField(required=False),
        "mode": drf_serializers.ChoiceField(["live", "shadow"], required=False,
                                            help_text="shadow: runs after the live chain, nothing applied"),
        "shadowVersion": drf_serializers.IntegerField(required=False, allow_null=True,
                                                      help_text="a draft to run in shadow next to the live code")}))
    def patch(self, request: Request, installation_id: str) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        if not {"enabled", "mode", "shadowVersion"} & set(data):
            raise InvalidInput("enabled", "send {\"enabled\": true|false} and/or {\"mode\": \"live\"|\"shadow\"}")
        if "enabled" in data and not isinstance(data["enabled"], bool):
            raise InvalidInput("enabled", "expected true or false")
        installation = plugins.get_installation(self.account, installation_id)
        if "mode" in data or "shadowVersion" in data:
            installation = shadow.set_mode(self.account, installation_id, data.get("mode"),
                                           data.get("shadowVersion", ...))
        if "enabled" in data:
            installation = plugins.set_enabled(self.account, installation_id, data["enabled"])
        return Response(s.InstallationSerializer(installation).data)

    @rehearsable
    def delete(self, request: Request, installation_id: str) -> Response:
        plugins.uninstall(self.account, installation_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PluginGrantView(AccountView):
    @rehearsable
    @body(inline_serializer("GrantRequest", {"grant": drf_serializers.ListField(
        child=drf_serializers.CharField())}), responses=s.InstallationSerializer)
    def post(self, request: Request, installation_id: str) -> Response:
        grant = body_field(request, "grant", "send {\"grant\": [permission, ...]}", allow_null=False)
        installation = plugins.grant(self.account, installation_id, grant)
        return Response(s.InstallationSerializer(installation).data)


class PluginReleaseView(AccountView):
    @extend_schema(request=None, responses=s.InstallationSerializer,
                   summary="End an installation's quarantine and slow lane now")
    def post(self, request: Request, installation_id: str) -> Response:
        return Response(s.InstallationSerializer(quarantine.release(self.account, installation_id)).data)


_CHAIN = inline_serializer("Chain", {"hook": drf_serializers.CharField(), "chain": s.ChainEntrySerializer(many=True)})


@extend_schema(responses=_CHAIN)
class ChainView(AccountView):
    def get(self, request: Request, hook: str) -> Response:
        entries = chains.chain_entries(self.account, hook)
        return Response({"hook": hook, "chain": s.ChainEntrySerializer(entries, many=True).data})

    @rehearsable
    @body(s.OrderRequestSerializer, responses=_CHAIN)
    def put(self, request: Request, hook: str) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        if "order" in data:
            entries = chains.set_order(self.account, hook, data["order"])
        elif "installationId" in data:
            entries = chains.move_to(self.account, hook, data["installationId"], data.get("position", 0))
        else:
            raise InvalidInput("order", "send {\"order\": [installationId, ...]} or "
                                        "{\"installationId\": ..., \"position\": n}")
        return Response({"hook": hook, "chain": s.ChainEntrySerializer(entries, many=True).data})

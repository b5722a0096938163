"""The platform-facing API: thin views over the service functions."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from plugins_app.errors import InvalidInput
from plugins_app.models import Installation
from plugins_app.runtime.hooks import HOOKS
from plugins_app.services import chains, execution, plugins, queries

from . import serializers as s


class AccountView(APIView):
    @property
    def account(self):
        return self.request.auth.account


class Pagination(PageNumberPagination):
    page_size_query_param = "pageSize"
    max_page_size = 500


class HookListView(AccountView):
    def get(self, request):
        return Response({"hooks": [spec.as_dict() for spec in HOOKS.values()]})


class HookExecuteView(AccountView):
    @extend_schema(request=s.ExecuteRequestSerializer)
    def post(self, request, hook):
        chains.require_hook(hook)
        body = _validated(s.ExecuteRequestSerializer, request.data)
        result, effects = execution.execute_hook(
            self.account, hook, body["context"], hop=body["hop"], turn_id=body["turnId"],
            extras={"conversation": request.data.get("conversation")} if isinstance(request.data, dict) else None)
        return Response(s.execute_response(result, effects))


class PluginListView(AccountView):
    def get(self, request):
        qs = Installation.objects.filter(account=self.account).select_related("plugin").order_by("created_at", "id")
        return Response({"plugins": s.InstallationSerializer(qs, many=True).data})

    @extend_schema(request=s.InstallRequestSerializer)
    def post(self, request):
        body = _validated(s.InstallRequestSerializer, request.data)
        if "catalog" in body:
            from plugins_app.services import catalog   # provided by the catalog feature
            installation = catalog.install_official(self.account, body["catalog"], settings=body.get("settings"),
                                                    grant=body.get("grant"))
        else:
            installation = plugins.install_plugin(
                self.account, name=body["name"], source=body["source"], language=body["language"],
                description=body["description"], grant=body.get("grant"))
        return Response(s.InstallationSerializer(installation).data, status=status.HTTP_201_CREATED)


class PluginDetailView(AccountView):
    def get(self, request, installation_id):
        return Response(s.InstallationSerializer(plugins.get_installation(self.account, installation_id)).data)

    def patch(self, request, installation_id):
        if not isinstance(request.data, dict) or "enabled" not in request.data:
            raise InvalidInput("enabled", "send {\"enabled\": true|false}")
        installation = plugins.set_enabled(self.account, installation_id, request.data["enabled"])
        return Response(s.InstallationSerializer(installation).data)

    def delete(self, request, installation_id):
        plugins.uninstall(self.account, installation_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PluginGrantView(AccountView):
    def post(self, request, installation_id):
        grant = request.data.get("grant") if isinstance(request.data, dict) else None
        if grant is None:
            raise InvalidInput("grant", "send {\"grant\": [permission, ...]}")
        installation = plugins.grant(self.account, installation_id, grant)
        return Response(s.InstallationSerializer(installation).data)


class ChainView(AccountView):
    def get(self, request, hook):
        entries = chains.chain_entries(self.account, hook)
        return Response({"hook": hook, "chain": s.ChainEntrySerializer(entries, many=True).data})

    def put(self, request, hook):
        data = request.data if isinstance(request.data, dict) else {}
        if "order" in data:
            entries = chains.set_order(self.account, hook, data["order"])
        elif "installationId" in data:
            entries = chains.move_to(self.account, hook, data["installationId"], data.get("position", 0))
        else:
            raise InvalidInput("order", "send {\"order\": [installationId, ...]} or "
                                        "{\"installationId\": ..., \"position\": n}")
        return Response({"hook": hook, "chain": s.ChainEntrySerializer(entries, many=True).data})


class _AuditListView(AccountView):
    serializer_class = None
    query = None

    def get(self, request):
        qs = type(self).query(self.account, request.query_params)
        paginator = Pagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(self.serializer_class(page, many=True).data)


class CancellationListView(_AuditListView):
    serializer_class = s.CancelLogSerializer
    query = staticmethod(queries.cancellations)


class WarningListView(_AuditListView):
    serializer_class = s.HandlerWarningSerializer
    query = staticmethod(queries.warnings)


def _validated(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data

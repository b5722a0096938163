"""The platform-facing API: thin views over the service functions."""

from collections.abc import Callable
from typing import Any, cast

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, status
from rest_framework import serializers as drf_serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from plugins_app.api.edge import body, body_field, check_request
from plugins_app.api.plugins import serializers as s
from plugins_app.api.renderers import JSONFirstNegotiation, PlainJSONRenderer
from plugins_app.errors import InvalidInput
from plugins_app.models import Installation
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.services.audit import queries
from plugins_app.services.execution import execute as execution
from plugins_app.services.execution import quarantine, tryit
from plugins_app.services.observability import tracing
from plugins_app.services.plugins import catalog, chains
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.versions import shadow


class AccountView(APIView):
    @property
    def account(self):
        return self.request.auth.account

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        check_request(self, request, kwargs)


class Pagination(PageNumberPagination):
    page_size_query_param = "pageSize"
    max_page_size = 500


class PingView(AccountView):
    """Checks a key: the cheapest authenticated call (also the benchmark's baseline)."""

    @extend_schema(request=None, responses=inline_serializer("Ping", {"ok": drf_serializers.BooleanField(),
                                                                      "accountId": drf_serializers.CharField()}))
    def get(self, request):
        return Response({"ok": True, "accountId": str(self.account.pk)})

    post = get


class HookListView(AccountView):
    @extend_schema(responses=OpenApiTypes.OBJECT, summary="The 14 hooks: fields, mutable fields, cancellable")
    def get(self, request):
        return Response({"hooks": [spec.as_dict() for spec in HOOKS.values()]})


EXECUTE_DESCRIPTION = """The platform calls this at each of the 14 hook points, with the hook's context.

The account's installations that hook this point run **in chain order**, one after another, each
seeing the value the one before it handed on. A handler may change the value, leave it, or
**cancel**, which stops the chain: then `outcome` is `cancelled`, `cancellation` names the plugin
and its reason, and the platform must not go on with the action.

**Fail-open**: a handler that throws, runs past its time budget or returns the wrong shape is
skipped with a warning (its `trace` entry says which) and the value goes on unchanged; a broken
plugin never takes an agent down.

`hop` counts how deep this call is, 0 to 64 (a plugin's action that fires another hook adds one),
and `turnId` is recorded with any cancellation.

In these docs, pick a hook's example under *Request body*: the `hook` in the path follows it.
"""


class HookExecuteView(AccountView):
    renderer_classes = [PlainJSONRenderer, *(cast(type[BaseRenderer], r) for r in api_settings.DEFAULT_RENDERER_CLASSES
                                             if r is not JSONRenderer)]
    content_negotiation_class = JSONFirstNegotiation

    @body(s.ExecuteRequestSerializer, responses=s.ExecuteResponseSerializer,
          summary="Run the account's chain for a hook", description=EXECUTE_DESCRIPTION)
    def post(self, request, hook):
        run = execution.execute_request(self.account, hook, request.data, traceparent=request.META.get("HTTP_TRACEPARENT"))
        # The platform can tell the hub's chain time from the network's (and so can the bench).
        headers = {"Server-Timing": tracing.server_timing(run.chain_ms, run.result.trace), **run.headers()}
        return Response(s.execute_response(run.result, run.effects), headers=headers)


class HookTryView(AccountView):
    @body(s.TryRequestSerializer, responses=s.TryResponseSerializer,
          summary="Try the account's chain for a hook on a sample, optionally with drafts swapped in; nothing is recorded")
    def post(self, request, hook):
        data = request.data if isinstance(request.data, dict) else None
        if data is None or "context" not in data:
            raise InvalidInput("context", "this field is required")
        run = tryit.try_chain(self.account, hook, data["context"], data.get("versions"))
        return Response(s.try_response(run))


_PLUGIN_LIST = inline_serializer("PluginList", {"plugins": s.InstallationSerializer(many=True)})


class PluginListView(AccountView):
    max_body_bytes = plugins.MAX_INSTALL_BODY_BYTES   # a bundled plugin's source; other bodies stay at 1 MiB
    @extend_schema(responses=_PLUGIN_LIST, operation_id="plugins_list")
    def get(self, request):
        qs = Installation.objects.filter(account=self.account).select_related("plugin").order_by("created_at", "id")
        return Response({"plugins": s.InstallationSerializer(qs, many=True).data})

    @body(s.InstallRequestSerializer, responses={201: s.InstallationSerializer})
    def post(self, request):
        body = _validated(s.InstallRequestSerializer, request.data)
        if "catalog" in body:
            installation = catalog.install_official(self.account, body["catalog"], settings=body.get("settings"),
                                                    grant=body.get("grant"))
        else:
            installation = plugins.install_plugin(
                self.account, name=body["name"], source=body["source"], language=body["language"],
                description=body["description"], grant=body.get("grant"), typecheck=body["typecheck"])
        return Response(s.InstallationSerializer(installation).data, status=status.HTTP_201_CREATED)


@extend_schema(responses=s.InstallationSerializer)
class PluginDetailView(AccountView):
    def get(self, request, installation_id):
        return Response(s.InstallationSerializer(plugins.get_installation(self.account, installation_id)).data)

    @body(inline_serializer("PluginPatch", {
        "enabled": drf_serializers.BooleanField(required=False),
        "mode": drf_serializers.ChoiceField(["live", "shadow"], required=False,
                                            help_text="shadow: runs after the live chain, nothing applied"),
        "shadowVersion": drf_serializers.IntegerField(required=False, allow_null=True,
                                                      help_text="a draft to run in shadow next to the live code")}))
    def patch(self, request, installation_id):
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

    def delete(self, request, installation_id):
        plugins.uninstall(self.account, installation_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PluginGrantView(AccountView):
    @body(inline_serializer("GrantRequest", {"grant": drf_serializers.ListField(
        child=drf_serializers.CharField())}), responses=s.InstallationSerializer)
    def post(self, request, installation_id):
        grant = body_field(request, "grant", "send {\"grant\": [permission, ...]}", allow_null=False)
        installation = plugins.grant(self.account, installation_id, grant)
        return Response(s.InstallationSerializer(installation).data)


class PluginReleaseView(AccountView):
    @extend_schema(request=None, responses=s.InstallationSerializer,
                   summary="End an installation's quarantine and slow lane now")
    def post(self, request, installation_id):
        return Response(s.InstallationSerializer(quarantine.release(self.account, installation_id)).data)


_CHAIN = inline_serializer("Chain", {"hook": drf_serializers.CharField(), "chain": s.ChainEntrySerializer(many=True)})


@extend_schema(responses=_CHAIN)
class ChainView(AccountView):
    def get(self, request, hook):
        entries = chains.chain_entries(self.account, hook)
        return Response({"hook": hook, "chain": s.ChainEntrySerializer(entries, many=True).data})

    @body(s.OrderRequestSerializer, responses=_CHAIN)
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


class _AuditListView(AccountView, generics.ListAPIView):
    """A paginated, filtered, account-scoped list; `query(account, params)` does the filtering."""

    pagination_class = Pagination
    query: Callable[..., Any] | None = None

    def get_queryset(self):
        return type(self).query(self.account, self.request.query_params)


_FILTERS = [
    OpenApiParameter(name, str, description=desc) for name, desc in (
        ("hook", "only this hook"), ("plugin", "only this plugin slug"),
        ("since", "ISO date or date-time"), ("until", "ISO date or date-time"))
]


@extend_schema(parameters=_FILTERS + [OpenApiParameter("agentId", str), OpenApiParameter("sessionId", str),
                                      OpenApiParameter("q", str, description="search in the reason")])
class CancellationListView(_AuditListView):
    serializer_class = s.CancelLogSerializer
    query = staticmethod(queries.cancellations)


@extend_schema(parameters=_FILTERS + [OpenApiParameter("kind", str)])
class WarningListView(_AuditListView):
    serializer_class = s.HandlerWarningSerializer
    query = staticmethod(queries.warnings)


@extend_schema(parameters=_FILTERS)
class UsageListView(_AuditListView):
    """Handler runs and time per plugin per hook per day (only handlers that actually ran)."""

    serializer_class = s.UsageSerializer
    query = staticmethod(queries.usage)


def _validated(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data

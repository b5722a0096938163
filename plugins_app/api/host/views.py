"""The host surface's API: the platform bridge, plugin logs and the account's agents."""

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from plugins_app.api.base import AccountView, AuditListView, Pagination
from plugins_app.api.edge import body
from plugins_app.api.host import serializers as hs
from plugins_app.api.schema import page_of
from plugins_app.services.host import agents, log, platform


def _platform_body(config) -> dict:
    if config is None:
        return {"baseUrl": None, "hasSecret": False, "updatedAt": None}
    return {"baseUrl": config.base_url, "hasSecret": config.has_secret,
            "updatedAt": config.updated_at.isoformat().replace("+00:00", "Z")}


_PLATFORM = inline_serializer("Platform", {
    "baseUrl": serializers.URLField(allow_null=True), "hasSecret": serializers.BooleanField(),
    "updatedAt": serializers.DateTimeField(allow_null=True)})
_PLATFORM_PUT = inline_serializer("PlatformUpdate", {
    "baseUrl": serializers.URLField(required=False),
    "signingSecret": serializers.CharField(write_only=True, required=False, help_text="omitted: kept")})


@extend_schema(responses=_PLATFORM)
class PlatformView(AccountView):
    """The account's platform bridge; the signing secret is write-only."""

    def get(self, request: Request) -> Response:
        return Response(_platform_body(platform.get_config(self.account)))

    @body(_PLATFORM_PUT, responses=_PLATFORM)
    def put(self, request: Request) -> Response:
        return Response(_platform_body(platform.configure(self.account, request.data)))


@extend_schema(parameters=[OpenApiParameter(name, str) for name in ("installationId", "plugin", "level", "hook")])
class LogListView(AuditListView):
    """What plugins wrote with host.log, newest first."""

    serializer_class = hs.PluginLogSerializer
    query = staticmethod(log.logs)


class AgentListView(AccountView):
    serializer_class = hs.AgentSerializer

    @extend_schema(parameters=[OpenApiParameter("plugin", str)], operation_id="agents_list",
                   responses=page_of(hs.AgentSerializer, "AgentPage"))
    def get(self, request: Request) -> Response:
        qs = agents.list_agents(self.account, request.query_params)
        paginator = Pagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(hs.AgentSerializer(page, many=True).data)


@extend_schema(responses=hs.AgentSerializer)
class AgentDetailView(AccountView):
    """One agent, registered by the platform with PUT {"name", "plugin": <slug or null>}."""

    serializer_class = hs.AgentSerializer

    def get(self, request: Request, agent_id: str) -> Response:
        return Response(hs.AgentSerializer(agents.get_agent(self.account, agent_id)).data)

    @body(inline_serializer("AgentRegistration", {
        "name": serializers.CharField(), "plugin": serializers.CharField(allow_null=True, required=False)}),
        responses={200: hs.AgentSerializer, 201: hs.AgentSerializer},
        summary="Register an agent (201) or update the one registered under this id (200)")
    def put(self, request: Request, agent_id: str) -> Response:
        agent, created = agents.register_agent(self.account, agent_id, request.data)
        return Response(hs.AgentSerializer(agent).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def delete(self, request: Request, agent_id: str) -> Response:
        agents.delete_agent(self.account, agent_id)
        return Response(status=status.HTTP_204_NO_CONTENT)

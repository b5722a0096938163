"""GET /secrets, PUT and DELETE /secrets/{name}: the value goes in, and never comes out."""

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from plugins_app.api.base import AccountView, AuditListView
from plugins_app.api.edge import body
from plugins_app.api.secrets import serializers as ss
from plugins_app.errors import InvalidInput
from plugins_app.models import Secret
from plugins_app.runtime.tables.permissions import SECRET_NAME
from plugins_app.services.secrets import store


class SecretListView(AuditListView):
    """The account's secrets: names, hosts, who set them and when; never a value."""

    serializer_class = ss.SecretSerializer

    def get_queryset(self) -> QuerySet[Secret]:
        return store.list_secrets(self.account)


@extend_schema(parameters=[OpenApiParameter("name", str, OpenApiParameter.PATH, pattern=f"^{SECRET_NAME}$",
                                            description="Plugins write {{secret.NAME}}; e.g. SLACK_TOKEN")])
class SecretDetailView(AccountView):
    @body(ss.SecretWriteSerializer, responses={200: ss.SecretSerializer, 201: ss.SecretSerializer},
          summary="Create a secret or change it (an omitted value or allowedHosts keeps the stored one)")
    def put(self, request: Request, name: str) -> Response:
        data = request.data
        if not isinstance(data, dict):
            raise InvalidInput("body", "expected a JSON object {value, allowedHosts, description?}")
        secret, created = store.set_secret(self.account, name, value=data.get("value"),
                                           allowed_hosts=data.get("allowedHosts"), description=data.get("description"))
        return Response(ss.SecretSerializer(secret).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        store.delete_secret(self.account, store.check_name(name))
        return Response(status=status.HTTP_204_NO_CONTENT)

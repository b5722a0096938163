"""An installation's host.kv store: its keys, paginated (GET), and deleting one key or all (DELETE)."""

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics
from rest_framework import serializers as drf_serializers
from rest_framework.request import Request
from rest_framework.response import Response

from plugins_app.api.base import AccountView, Pagination
from plugins_app.models import KvEntry
from plugins_app.services.kv import browse


class KvEntrySerializer(drf_serializers.Serializer):
    key = drf_serializers.CharField()
    value = drf_serializers.JSONField(help_text="The stored JSON; a secret's value shows as [secret NAME].")
    size = drf_serializers.IntegerField(help_text="Bytes of the key and the value, as the quota counts them.")
    expiresAt = drf_serializers.DateTimeField(allow_null=True)
    updatedAt = drf_serializers.DateTimeField()


class PluginKvView(AccountView, generics.ListAPIView):
    # A list view, so the schema documents GET as a page of KvEntry; `list` reads through the service.
    pagination_class = Pagination
    serializer_class = KvEntrySerializer
    queryset = KvEntry.objects.none()

    @extend_schema(parameters=[OpenApiParameter("prefix", str, description="only keys starting with this")],
                   summary="An installation's kv keys (not expired), in key order")
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.list(request, *args, **kwargs)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        installation_id = kwargs["installation_id"]
        installation, rows = browse.entries_of(self.account, installation_id, request.query_params.get("prefix", ""))
        page = self.paginate_queryset(rows)
        redactor = browse.account_redactor(installation.account_id)
        return self.get_paginated_response([browse.shown(entry, redactor) for entry in page or []])

    @extend_schema(parameters=[OpenApiParameter("key", str, description="the one key to delete; without it, "
                                                                        "every key of the installation")],
                   request=None, responses=inline_serializer("KvDeleted", {"deleted": drf_serializers.IntegerField()}),
                   summary="Delete a kv key, or clear the installation's store (in the change log)")
    def delete(self, request: Request, installation_id: str) -> Response:
        if "key" in request.query_params:
            browse.delete_key(self.account, installation_id, request.query_params["key"])
            return Response({"deleted": 1})
        return Response({"deleted": browse.clear(self.account, installation_id)})

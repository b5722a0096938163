"""The plugin SDK: TypeScript declarations of the hooks and the host surface, for authors' editors and tsc."""

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request

from plugins_app.api.base import AccountView
from plugins_app.runtime.tables.sdk_types import middleware_d_ts


class SdkTypesView(AccountView):
    @extend_schema(responses={200: OpenApiResponse(OpenApiTypes.STR, description="middleware.d.ts")},
                   summary="TypeScript declarations for plugins (hooks, contexts, results, host members)")
    def get(self, request: Request) -> HttpResponse:
        response = HttpResponse(middleware_d_ts(), content_type="application/typescript; charset=utf-8")
        response["Content-Disposition"] = 'inline; filename="middleware.d.ts"'
        return response

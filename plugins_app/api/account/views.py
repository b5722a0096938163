"""The account as a whole: its installations and chain orders in one answer (what `hub export` writes)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from plugins_app.api.plugins.views import AccountView
from plugins_app.services.plugins import export


class AccountExportView(AccountView):
    @extend_schema(responses=OpenApiTypes.OBJECT,
                   summary="Installations (settings without secrets, own plugins' source) and chain orders")
    def get(self, request):
        return Response(export.account_state(self.account))

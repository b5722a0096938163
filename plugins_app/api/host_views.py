"""The host surface's API: the platform bridge, plugin logs and the account's agents."""

from rest_framework.response import Response

from plugins_app.services import platform

from .views import AccountView


def _platform_body(config) -> dict:
    if config is None:
        return {"baseUrl": None, "hasSecret": False, "updatedAt": None}
    return {"baseUrl": config.base_url, "hasSecret": config.has_secret,
            "updatedAt": config.updated_at.isoformat().replace("+00:00", "Z")}


class PlatformView(AccountView):
    """The account's platform bridge; the signing secret is write-only."""

    def get(self, request):
        return Response(_platform_body(platform.get_config(self.account)))

    def put(self, request):
        return Response(_platform_body(platform.configure(self.account, request.data)))

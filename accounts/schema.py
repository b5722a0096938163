"""OpenAPI (drf-spectacular) description of the API key authentication scheme."""
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "mh_<prefix>_<secret>",
            "description": "An account's API key, sent as `Authorization: Bearer mh_...`.",
        }

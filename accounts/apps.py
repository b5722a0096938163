"""App configuration for accounts."""
from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the OpenAPI description of ApiKeyAuthentication with drf-spectacular.
        from . import schema  # noqa: F401

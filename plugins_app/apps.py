"""App configuration for plugins_app."""

from django.apps import AppConfig


class PluginsAppConfig(AppConfig):
    name = "plugins_app"
    verbose_name = "Plugins and hooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported here: models must be loaded before the services are.
        from plugins_app.services import host_members, metrics

        host_members.register()
        metrics.register()

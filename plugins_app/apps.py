"""App configuration for plugins_app."""

from django.apps import AppConfig


class PluginsAppConfig(AppConfig):
    name = "plugins_app"
    verbose_name = "Plugins and hooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from plugins_app.services import host_members  # noqa: F401  registers host.* and the log sink
        from plugins_app.services import metrics

        metrics.register()

"""What the host surface stores: the platform bridge, plugin logs, agents and their workspaces."""

from django.db import models

from accounts.models import Account

from .plugins import HOOK_CHOICES, Installation, Plugin


class PlatformConfig(models.Model):
    """Where the account's platform listens, and the secret the hub signs its calls with."""

    account = models.OneToOneField(Account, on_delete=models.CASCADE, related_name="platform")
    base_url = models.URLField(max_length=500, help_text="e.g. https://platform.example.com/hub")
    # Kept in clear because the hub signs with it; never shown again once saved.
    signing_secret = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "platform bridge"

    def __str__(self) -> str:
        return f"platform of {self.account}: {self.base_url}"

    @property
    def has_secret(self) -> bool:
        return bool(self.signing_secret)


class PluginLog(models.Model):
    """One host.log line; each installation keeps its newest HUB_PLUGIN_LOG_LIMIT lines."""

    class Level(models.TextChoices):
        DEBUG = "debug", "Debug"
        INFO = "info", "Info"
        WARN = "warn", "Warning"
        ERROR = "error", "Error"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="plugin_logs")
    installation = models.ForeignKey(Installation, null=True, on_delete=models.SET_NULL, related_name="logs")
    plugin_slug = models.CharField(max_length=100, db_index=True)
    hook = models.CharField(max_length=40, choices=HOOK_CHOICES, db_index=True)
    level = models.CharField(max_length=8, choices=Level.choices, db_index=True)
    message = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["installation", "-id"])]

    def __str__(self) -> str:
        return f"{self.level} {self.plugin_slug}: {self.message[:60]}"


class Agent(models.Model):
    """An agent of the account as the platform registered it; `plugin` is the plugin whose crew it is."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="agents")
    agent_id = models.CharField(max_length=64, help_text="The platform's id (a 64-bit number, as a string).")
    name = models.CharField(max_length=200)
    plugin = models.ForeignKey(Plugin, null=True, blank=True, on_delete=models.SET_NULL, related_name="crew",
                               help_text="The plugin that owns this agent (its crew), if any.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "agent_id"]
        constraints = [
            models.UniqueConstraint(fields=["account", "agent_id"], name="one_agent_per_platform_id"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.agent_id})"


class WorkspaceFile(models.Model):
    """A text file in an agent's workspace (host.workspace), stored by the hub."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="workspace_files")
    agent_id = models.CharField(max_length=64)
    path = models.CharField(max_length=255)
    content = models.TextField(blank=True)
    size = models.PositiveIntegerField(help_text="Bytes of the content, UTF-8 encoded.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent_id", "path"]
        constraints = [
            models.UniqueConstraint(fields=["account", "agent_id", "path"], name="one_workspace_file_per_path"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}:{self.path}"

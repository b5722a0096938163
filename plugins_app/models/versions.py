"""Immutable versions of an installation's code, and the account change log."""

from django.conf import settings
from django.db import models

from accounts.models import Account

from .audit import ImmutableModel
from .plugins import Installation


class PluginVersion(ImmutableModel):
    """One installation's code as it was saved once; only `Installation.live_version` says which runs."""

    installation = models.ForeignKey(Installation, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    language = models.CharField(max_length=16)
    source = models.TextField()
    compiled_js = models.TextField()
    code_hash = models.CharField(max_length=64)
    hooks = models.JSONField(default=list)
    matchers = models.JSONField(default=dict, help_text="When each handler wants to run: {hook: matcher}.")
    host_members = models.JSONField(default=list)
    permissions = models.JSONField(default=list, help_text="Permissions this version's code asks for.")
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_by_name = models.CharField(max_length=150, blank=True, help_text="Who saved it, as shown.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["installation", "-number"]
        constraints = [models.UniqueConstraint(fields=["installation", "number"], name="one_version_number")]

    def __str__(self) -> str:
        return f"{self.installation.plugin.slug} v{self.number}"


class AccountChange(ImmutableModel):
    """Who changed what in an account's plugins and chains, and when, with the value before and after."""

    class Action(models.TextChoices):
        INSTALL = "install", "Installed"
        UNINSTALL = "uninstall", "Uninstalled"
        DRAFT = "draft", "Saved a draft version"
        DEPLOY = "deploy", "Deployed"
        ROLLBACK = "rollback", "Rolled back"
        UPGRADE = "upgrade", "Catalog upgrade"
        ENABLE = "enable", "Enabled"
        DISABLE = "disable", "Disabled"
        REORDER = "reorder", "Reordered a chain"
        GRANT = "grant", "Changed grants"
        SETTINGS = "settings", "Changed settings"
        RELEASE = "release", "Released from quarantine"
        SHADOW = "shadow", "Changed shadow mode"
        PROMOTE = "promote", "Promoted from shadow to live"
        SECRET_SET = "secret_set", "Set a secret"
        SECRET_ROTATE = "secret_rotate", "Replaced a secret's value"
        SECRET_UPDATE = "secret_update", "Changed a secret's hosts or description"
        SECRET_DELETE = "secret_delete", "Deleted a secret"
        KV_DELETE = "kv_delete", "Deleted a plugin's kv key"
        KV_CLEAR = "kv_clear", "Cleared a plugin's kv store"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="changes")
    action = models.CharField(max_length=20, choices=Action.choices, db_index=True)
    installation = models.ForeignKey(Installation, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    plugin_slug = models.CharField(max_length=100, blank=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_name = models.CharField(max_length=150, help_text="The user, the API key or the system.")
    summary = models.CharField(max_length=500)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "account change"
        verbose_name_plural = "change log"

    def __str__(self) -> str:
        return self.summary

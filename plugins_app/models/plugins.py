"""Plugins (compiled code), their installations in accounts, and each hook's chain order."""

from django.db import models
from django.db.models import Q

from accounts.models import Account
from plugins_app.runtime.tables.hooks import HOOK_NAMES

HOOK_CHOICES = [(name, name) for name in HOOK_NAMES]


class Plugin(models.Model):
    class Language(models.TextChoices):
        TYPESCRIPT = "typescript", "TypeScript"
        JAVASCRIPT = "javascript", "JavaScript"

    # Null for an official catalog plugin, shared by every account that installs it.
    account = models.ForeignKey(Account, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="plugins")
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=100)
    description = models.TextField(blank=True)
    version = models.CharField(max_length=32, default="1.0.0")
    language = models.CharField(max_length=16, choices=Language.choices, default=Language.TYPESCRIPT)
    source = models.TextField(help_text="The plugin as written.")
    compiled_js = models.TextField(editable=False)
    code_hash = models.CharField(max_length=64, editable=False)
    hooks = models.JSONField(default=list, editable=False, help_text="Hooks the plugin defines.")
    matchers = models.JSONField(default=dict, editable=False,
                                help_text="When each handler wants to run: {hook: matcher} (runtime/matching/).")
    host_members = models.JSONField(default=list, editable=False,
                                    help_text="host.* members the code calls.")
    permissions = models.JSONField(default=list, editable=False,
                                   help_text="Permissions derived from the host members.")
    settings_schema = models.JSONField(default=dict, blank=True,
                                       help_text="Settings the plugin takes (catalog manifest).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["account", "slug"], name="plugin_slug_unique_per_account"),
            models.UniqueConstraint(fields=["slug"], condition=Q(account__isnull=True),
                                    name="official_plugin_slug_unique"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_official(self) -> bool:
        return self.account_id is None


class Installation(models.Model):
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="installations")
    # RESTRICT, not PROTECT: a plugin that is installed cannot be deleted on its own, but deleting an
    # account takes its own plugins and their installations together.
    plugin = models.ForeignKey(Plugin, on_delete=models.RESTRICT, related_name="installations")
    enabled = models.BooleanField(default=True)
    granted_permissions = models.JSONField(default=list, blank=True)
    settings = models.JSONField(default=dict, blank=True)
    # Quarantine and slow lane (plugins_app.services.execution.quarantine): both end by time, no job needed.
    quarantined_until = models.DateTimeField(null=True, blank=True)
    quarantine_reason = models.CharField(max_length=500, blank=True)
    quarantine_warned = models.BooleanField(default=False,
                                            help_text="The warning of this cool-down was written.")
    strikes = models.JSONField(default=list, blank=True,
                               help_text="ISO timestamps of recent timeouts, wedges and memory overruns.")
    slow_lane_until = models.DateTimeField(null=True, blank=True)
    slow_lane_reason = models.CharField(max_length=500, blank=True)
    # The number of the PluginVersion that runs (services/versions/releases.py); null before versions existed.
    live_version = models.PositiveIntegerField(null=True, blank=True)
    # Shadow mode (services/versions/shadow.py): a shadowed installation leaves the live chains and runs after
    # them on a copy of the context; a shadowed draft runs that way next to the live code.
    mode = models.CharField(max_length=10, choices=[("live", "live"), ("shadow", "shadow")], default="live")
    shadow_version = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["account", "plugin__name"]
        constraints = [
            models.UniqueConstraint(fields=["account", "plugin"], name="one_installation_per_plugin"),
        ]

    def __str__(self) -> str:
        return f"{self.plugin} in {self.account}"


class StrikeBook(models.Model):
    """Strikes and quarantine kept for an account's plugin code (its compiled code's hash) rather than
    for one installation, so uninstalling and installing the same code again starts nowhere fresh
    (services/plugins/strike_book.py). `code_hash` ACCOUNT_WIDE holds the account's own book: the
    strikes that cost an engine (wedges, memory), whichever of its plugins earned them."""

    ACCOUNT_WIDE = "*"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="strike_books")
    code_hash = models.CharField(max_length=64)
    strikes = models.JSONField(default=list, blank=True, help_text="ISO timestamps of recent strikes.")
    quarantined_until = models.DateTimeField(null=True, blank=True)
    quarantine_reason = models.CharField(max_length=500, blank=True)
    slow_lane_until = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "code_hash"], name="one_strike_book_per_code")]

    def __str__(self) -> str:
        return f"strikes of {self.code_hash[:12]} in {self.account_id}"


class ChainEntry(models.Model):
    """One installation's place in one hook's chain; (position, id) orders the chain totally."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="chain_entries")
    hook = models.CharField(max_length=40, choices=HOOK_CHOICES)
    installation = models.ForeignKey(Installation, on_delete=models.CASCADE, related_name="chain_entries")
    position = models.PositiveIntegerField(default=0, db_index=True)

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["installation", "hook"], name="one_entry_per_hook"),
            # Two entries of one chain never share a place (issue 40, item 5): writers hold the
            # account's lock, and this proves they did. Contiguity (0..n-1) is the services' to keep.
            models.UniqueConstraint(fields=["account", "hook", "position"], name="one_entry_per_position"),
        ]
        indexes = [models.Index(fields=["account", "hook", "position"])]
        verbose_name_plural = "chain entries"

    def __str__(self) -> str:
        # Places are counted from 1 wherever people read them (the chain page, the installation page);
        # `position` itself is 0-based.
        return f"{self.hook} #{self.position + 1}: {self.installation.plugin}"

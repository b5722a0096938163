"""plugins_app's admin: account-scoped pages for plugins, chains, audit trails and the try-it page."""

from django.contrib import admin

# Importing a module registers its admins.
from . import accounts, audit, chains, changes, home, host, latency, plugins, scheduling, ssh, ssh_turns, versions  # noqa: F401
from .scoping import (
    AccountScopedAdmin,
    AccountScopedStackedInline,
    AccountScopedTabularInline,
    ReadOnlyAccountScopedAdmin,
)

admin.site.site_header = "Middleware Hub"
admin.site.site_title = "Middleware Hub"
admin.site.index_title = "Plugins, chains and audit trails"
home.install(admin.site)

__all__ = ["AccountScopedAdmin", "AccountScopedStackedInline", "AccountScopedTabularInline",
           "ReadOnlyAccountScopedAdmin"]

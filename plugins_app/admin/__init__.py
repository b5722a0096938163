"""plugins_app's admin: account-scoped pages for plugins, chains, audit trails and the try-it page."""

from django.contrib import admin

# Django's autodiscovery imports this package; importing each page module registers its admins.
from plugins_app.admin import accounts, home, host, kv, scheduling  # noqa: F401
from plugins_app.admin.audit import changes, latency, logs  # noqa: F401
from plugins_app.admin.plugins import chains, installations  # noqa: F401
from plugins_app.admin.secrets import pages as secret_pages  # noqa: F401
from plugins_app.admin.ssh import hosts, turns  # noqa: F401
from plugins_app.admin.versions import pages, recorded  # noqa: F401

from . import initial_data
from .scoping import (
    AccountScopedAdmin,
    AccountScopedTabularInline,
    ReadOnlyAccountScopedAdmin,
)

admin.site.site_header = "Middleware Hub"
admin.site.site_title = "Middleware Hub"
admin.site.index_title = "Plugins, chains and audit trails"
home.install(admin.site)
initial_data.guard(admin.site)   # last: every app's admins are registered by now

__all__ = ["AccountScopedAdmin", "AccountScopedTabularInline",
           "ReadOnlyAccountScopedAdmin"]

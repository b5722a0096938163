"""plugins_app's admin: account-scoped pages for plugins, chains, audit trails and the try-it page."""

from .scoping import AccountScopedAdmin, AccountScopedStackedInline, AccountScopedTabularInline, ReadOnlyAccountScopedAdmin

__all__ = ["AccountScopedAdmin", "AccountScopedStackedInline", "AccountScopedTabularInline",
           "ReadOnlyAccountScopedAdmin"]

"""plugins_app's admin: account-scoped pages for plugins, chains, audit trails and the try-it page."""

from . import scheduling, ssh  # noqa: F401  (registers the admins)
from .scoping import AccountScopedAdmin, AccountScopedStackedInline, AccountScopedTabularInline, ReadOnlyAccountScopedAdmin

__all__ = ["AccountScopedAdmin", "AccountScopedStackedInline", "AccountScopedTabularInline",
           "ReadOnlyAccountScopedAdmin"]

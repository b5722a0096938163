"""Admin pages for account secrets."""

"""The account-wide API: export (and the live tail)."""

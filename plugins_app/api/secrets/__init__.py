"""The secrets API: write-only values, listed by name."""

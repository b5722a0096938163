"""The hook engine: the hook table, V8 sandbox processes and the chain runner (no Django)."""

"""Running hooks over the API: ping, the hook table, execute and try."""

"""A hook named by a caller, looked up in the hook table: its spec, or UnknownHook (a 404)."""

from __future__ import annotations

from plugins_app.errors import UnknownHook
from plugins_app.runtime.tables.hooks import HookSpec, get_hook


def require_hook(name: str) -> HookSpec:
    spec = get_hook(name)
    if spec is None:
        raise UnknownHook(name)
    return spec

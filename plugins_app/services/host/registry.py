"""The host.* members plugins call: found by walking this package for @member functions, and handed to
the host bridge by register() (from the app's ready())."""

import importlib
import pkgutil
from types import ModuleType

from plugins_app.services import host
from plugins_app.services.execution import async_host_bridge, host_bridge
from plugins_app.services.execution.host_bridge import Member


def _modules() -> list[ModuleType]:
    """Every module of services/host/ (a new one needs no listing)."""
    return [importlib.import_module(m.name) for m in pkgutil.walk_packages(host.__path__, host.__name__ + ".")]


def member_functions() -> list[Member]:
    """Every function a module of services/host/ marks with @member."""
    return [fn for module in _modules() for fn in host_bridge.marked_members(module)]


def register() -> None:
    host_bridge.register_members(member_functions())
    # The async implementations of members that wait on the network, for async runs (the others run
    # their sync function on a host thread there).
    async_host_bridge.register_async_members([fn for module in _modules()
                                              for fn in async_host_bridge.marked_async_members(module)])

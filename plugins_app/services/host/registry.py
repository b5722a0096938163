"""The host.* members plugins call: found by walking this package for @member functions, and handed to
the host bridge by register() (from the app's ready())."""

import importlib
import pkgutil

from plugins_app.services import host
from plugins_app.services.execution import host_bridge
from plugins_app.services.execution.host_bridge import Member


def member_functions() -> list[Member]:
    """Every function a module of services/host/ marks with @member (a new module needs no listing)."""
    found: list[Member] = []
    for module_info in pkgutil.walk_packages(host.__path__, host.__name__ + "."):
        found += host_bridge.marked_members(importlib.import_module(module_info.name))
    return found


def register() -> None:
    host_bridge.register_members(member_functions())

"""The install pages' permission review: what a plugin needs, the grant offered, and what fails without it."""

from __future__ import annotations

from django.contrib import messages

from plugins_app.models import Installation
from plugins_app.runtime.tables.permissions import calls_needing

GRANT_LABEL = "Permissions it needs"
GRANT_HELP = ("Ticked: granted when you install. Untick what you do not approve; the plugin is still installed, "
              "but each call that needs an unticked permission fails (its promise rejects and the chain "
              "runs on), until you grant it on the installation's page.")


def grant_choices(permissions, members) -> list[tuple[str, str]]:
    """Each permission the code asks for, labelled with the calls that need it."""
    return [(p, f"{p}: for {', '.join(calls_needing(p, members)) or 'the host members it calls'}")
            for p in permissions]


def _chains(plugin) -> str:
    hooks = list(plugin.hooks)
    return f"the {', '.join(hooks)} chain{'s' if len(hooks) > 1 else ''}"


def installed_message(installation: Installation) -> tuple[int, str]:
    """The message after an install: a success when everything it needs is granted; otherwise a warning
    naming each permission left out and the calls that fail until it is granted."""
    plugin = installation.plugin
    where = f"Installed {plugin.name} in {installation.account} at the end of {_chains(plugin)}"
    missing = [p for p in plugin.permissions if p not in (installation.granted_permissions or ())]
    if not missing:
        return messages.SUCCESS, f"{where}: it runs from the next call."
    failing = "; ".join(f"{p} ({', '.join(calls_needing(p, plugin.host_members)) or 'its host calls'})"
                        for p in missing)
    return messages.WARNING, (f"{where}, but not granted {failing}: those calls fail until you grant "
                              "them under “What it may do” below.")

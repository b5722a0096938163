"""Writing versions: the code an installation is installed or upgraded with, and drafts."""

from __future__ import annotations

from django.db.models import Max

from plugins_app.models import AccountChange, Installation, Plugin, PluginVersion
from plugins_app.services.audit import changes

CODE_FIELDS = ("language", "source", "compiled_js", "code_hash", "hooks", "matchers", "host_members", "permissions")
MAX_NOTE_CHARS = 500


def create_version(installation: Installation, code: dict, note: str, actor: changes.Actor) -> PluginVersion:
    last = installation.versions.aggregate(m=Max("number"))["m"] or 0
    return PluginVersion.objects.create(installation=installation, number=last + 1, note=note[:MAX_NOTE_CHARS],
                                        created_by_id=actor.user_id, created_by_name=actor.name,
                                        **{name: code[name] for name in CODE_FIELDS})


def _code_of(plugin: Plugin) -> dict:
    return {name: getattr(plugin, name) for name in CODE_FIELDS}


def record_installed(installation: Installation, note: str = "installed") -> PluginVersion:
    """Version 1 of a new installation: the code it was installed with, live."""
    version = create_version(installation, _code_of(installation.plugin), note, changes.current_actor())
    Installation.objects.filter(pk=installation.pk).update(live_version=version.number)
    installation.live_version = version.number
    return version


def record_upgrade(installation: Installation, previous_version: str) -> PluginVersion:
    """A catalog upgrade changed the shared code: a new version of each installation, live at once."""
    plugin = installation.plugin
    note = f"catalog upgrade {previous_version} -> {plugin.version}"
    version = create_version(installation, _code_of(plugin), note, changes.SYSTEM)
    before = installation.live_version
    Installation.objects.filter(pk=installation.pk).update(live_version=version.number)
    installation.live_version = version.number
    changes.record(installation.account_id, AccountChange.Action.UPGRADE,
                   f"{plugin.slug}: catalog upgrade to {plugin.version} (version {version.number})",
                   installation=installation, before={"version": before, "catalogVersion": previous_version},
                   after={"version": version.number, "catalogVersion": plugin.version}, actor=changes.SYSTEM)
    return version

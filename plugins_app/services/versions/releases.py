"""Versions of an installation's code: drafts, deploying one, rolling back, and the history."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from plugins_app.errors import Conflict, InvalidInput, NotFound
from plugins_app.models import AccountChange, ChainEntry, Installation, PluginVersion
from plugins_app.services.audit import changes
from plugins_app.services.engine.tier import drop_compartments
from plugins_app.services.plugins import chains
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.plugins.version_records import CODE_FIELDS, create_version


class PermissionNotGranted(Conflict):
    default_code = "permission_not_granted"

    def __init__(self, version: PluginVersion, missing: list[str]):
        super().__init__(f"version {version.number} asks for {', '.join(missing)}, not granted to this installation; "
                         "grant it first (or send it in \"grant\" with the deploy)", missing=missing)


def list_versions(account, installation_id) -> tuple[Installation, list[PluginVersion]]:
    installation = plugins.get_installation(account, installation_id)
    return installation, list(installation.versions.order_by("-number"))


def get_version(installation: Installation, number) -> PluginVersion:
    text = str(number)
    if isinstance(number, bool) or not text.isascii() or not text.isdigit() or len(text) > 9:
        raise NotFound(f"version {number!r} is not a version number (1, 2, ...)", field="number")
    version = installation.versions.filter(number=int(text)).first()
    if version is None:
        raise NotFound(f"installation {installation.pk} ({installation.plugin.slug}) has no version {text}",
                       field="number")
    return version


def not_granted(installation: Installation, version: PluginVersion) -> list[str]:
    """Permissions `version` asks for that the installation has not been granted."""
    return sorted(set(version.permissions) - set(installation.granted_permissions or ()))


def create_draft(account, installation_id, *, source, language=None, note="", typecheck=False) -> PluginVersion:
    """Compile `source` and keep it as the installation's next version; nothing that runs changes."""
    installation = plugins.get_installation(account, installation_id)
    _require_own_code(installation)
    language = language or installation.plugin.language
    if not isinstance(note, str):
        raise InvalidInput("note", "expected a string")
    compiled = plugins.compile_source(source, language, typecheck=typecheck, account=account)   # outside the transaction: it can take a while
    code = {"language": language, "source": source, **compiled}
    for attempt in range(3):
        try:
            with transaction.atomic():
                version = create_version(installation, code, note.strip(), changes.current_actor())
                changes.record(account.pk, AccountChange.Action.DRAFT,
                               f"{installation.plugin.slug}: saved draft version {version.number}",
                               installation=installation, after=_brief(version))
                return version
        except IntegrityError:   # another draft took the number: take the next one
            if attempt == 2:
                raise Conflict("another version was saved at the same moment; try again") from None
    raise AssertionError("unreachable")


def _require_own_code(installation: Installation) -> None:
    if installation.plugin.is_official:
        raise Conflict(f"{installation.plugin.slug} is an official plugin: its code follows the catalog "
                       "(sync_catalog); install your own copy to change it")


def _brief(version: PluginVersion) -> dict:
    return {"version": version.number, "codeHash": version.code_hash, "hooks": version.hooks,
            "permissions": version.permissions}


@transaction.atomic
def deploy(account, installation_id, number, *, grant=None) -> tuple[Installation, PluginVersion]:
    """Make version `number` the code that runs from the very next call; positions, settings and
    grants stay. `grant` adds permissions the version asks for at the same time."""
    chains.lock_account(account.pk)   # one deploy of an account at a time
    installation = plugins.get_installation(account, installation_id)
    _require_own_code(installation)
    version = get_version(installation, number)
    if version.number == installation.live_version:
        return installation, version
    if grant is not None:
        plugins.check_permission_names(grant, version.permissions)
        installation.granted_permissions = sorted(set(installation.granted_permissions or ()) | set(grant))
    missing = not_granted(installation, version)
    if missing:
        raise PermissionNotGranted(version, missing)
    before_number = installation.live_version
    _make_live(installation, version)
    rollback = before_number is not None and version.number < before_number
    action = AccountChange.Action.ROLLBACK if rollback else AccountChange.Action.DEPLOY
    verb = "rolled back to" if rollback else "deployed"
    changes.record(account.pk, action, f"{installation.plugin.slug}: {verb} version {version.number}"
                                       f" (was {before_number})", installation=installation,
                   before={"version": before_number}, after={**_brief(version),
                                                            "granted": installation.granted_permissions})
    return installation, version


def _make_live(installation: Installation, version: PluginVersion) -> None:
    # An account's own plugin belongs to this one installation, so its row carries the live code
    # and everything that reads a plugin (the chain cache, grants, the API) sees the deployed version.
    plugin = installation.plugin
    old_hooks = list(plugin.hooks)
    for name in CODE_FIELDS:
        setattr(plugin, name, getattr(version, name))
    plugin.save()
    left = list(ChainEntry.objects.filter(installation=installation).exclude(hook__in=version.hooks)
                .values_list("hook", flat=True))
    ChainEntry.objects.filter(installation=installation, hook__in=left).delete()
    chains.compact(installation.account_id, left)
    chains.append_to_chains(installation, [h for h in version.hooks if h not in old_hooks])
    installation.live_version = version.number
    installation.save(update_fields=["live_version", "granted_permissions", "updated_at"])
    chains.mark_changed(installation.account_id)
    # The old version's compartments (and their state) go from every engine now, not only from
    # those where the installation runs next.
    drop_compartments(installation.account_id, [installation.pk])


def rollback(account, installation_id, *, grant=None) -> tuple[Installation, PluginVersion]:
    """Redeploy the newest version older than the live one that was live before (drafts never deployed
    are passed over)."""
    installation = plugins.get_installation(account, installation_id)
    _require_own_code(installation)
    previous = rollback_target(installation)
    if previous is None:
        raise Conflict(f"{installation.plugin.slug} runs version {installation.live_version}; "
                       "there is no earlier version to roll back to")
    return deploy(account, installation_id, previous.number, grant=grant)


def was_live(installation: Installation) -> set[int]:
    """The numbers of the versions that have run as the installation's live code, the live one included."""
    numbers = {number for row in deploy_history(installation)
               if isinstance(row.after, dict) and isinstance(number := row.after.get("version"), int)}
    return numbers | ({installation.live_version} if installation.live_version else set())


def rollback_target(installation: Installation) -> PluginVersion | None:
    """What rollback() would deploy: the newest earlier version that was live; None when there is none."""
    return (installation.versions.filter(number__lt=installation.live_version or 0, number__in=was_live(installation))
            .order_by("-number").first())


def deploy_history(installation: Installation):
    """Who deployed what when, newest first."""
    return (AccountChange.objects.filter(installation=installation,
                                         action__in=[AccountChange.Action.DEPLOY, AccountChange.Action.ROLLBACK,
                                                     AccountChange.Action.UPGRADE, AccountChange.Action.INSTALL])
            .order_by("-created_at", "-id"))

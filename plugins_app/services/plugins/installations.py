"""Installing, removing, enabling and granting plugins for an account."""

from __future__ import annotations

import hashlib

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from accounts.services import lock_account
from plugins_app.errors import CompileFailed, Conflict, InvalidInput, TooManyRequests, TypeCheckFailed, Unavailable
from plugins_app.models import AccountChange, Installation, Plugin, PluginVersion
from plugins_app.runtime.matching.declare import MatcherError, declare
from plugins_app.runtime.source_text import normalised_source
from plugins_app.runtime.tables.hooks import HOOK_NAMES, HOOKS
from plugins_app.runtime.tables.permissions import derive_permissions, secret_permissions
from plugins_app.services.audit import changes
from plugins_app.services.engine.tier import drop_compartments, get_tier
from plugins_app.services.ids import get_in_account
from plugins_app.services.plugins import chains, strike_book
from plugins_app.services.plugins.version_records import record_installed

MAX_SOURCE_CHARS = 2 * 1024 * 1024   # a bundled library fits (zod minified is 0.3-0.5 MiB)
# An install body carries the source as a JSON string: escaping (\" and \\, \uXXXX) and multi-byte
# UTF-8 can make it up to a few times larger than its characters.
MAX_INSTALL_BODY_BYTES = 3 * MAX_SOURCE_CHARS   # Django's DATA_UPLOAD_MAX_MEMORY_SIZE is set to match
LANGUAGES = ("typescript", "javascript")


def compile_source(source: str, language: str, *, typecheck: bool = False, account=None) -> dict:
    """Transpile and load the source once; return the source as kept (LF line endings, a final newline),
    code, hooks, matchers, host members and permissions. Every way code enters (the admin's editor, the
    API, the CLI, the catalog) passes here, so the same code is stored, hashed and diffed the same.
    `typecheck` also checks a TypeScript source's types against the SDK (TypeCheckFailed). The compile
    engine takes accounts in turn: `account` (whose turn) with too many compiles waiting is
    TooManyRequests, and a compile that found no turn in time is Unavailable."""
    if not isinstance(source, str) or not source.strip():
        raise InvalidInput("source", "the plugin's source is empty")
    source = normalised_source(source)
    if len(source) > MAX_SOURCE_CHARS:
        raise InvalidInput("source", f"{len(source)} characters is over the {MAX_SOURCE_CHARS} character (2 MiB) limit")
    if language not in LANGUAGES:
        raise InvalidInput("language", "expected typescript or javascript")
    if not isinstance(typecheck, bool):
        raise InvalidInput("typecheck", "expected true or false")
    result = get_tier().compile(source, language, typecheck, str(getattr(account, "pk", account) or ""))
    if result.get("busy") == "account":
        raise TooManyRequests(str(result.get("message")), retryAfter=result.get("retryAfter"))
    if result.get("busy"):
        raise Unavailable(str(result.get("message")), retry_after=int(result.get("retryAfter") or 5))
    if result.get("errors"):
        errors = [{k: e[k] for k in ("message", "line", "column") if k in e} for e in result["errors"]]
        raise TypeCheckFailed(errors) if result.get("stage") == "types" else CompileFailed(errors)
    unknown = [h for h in result["hooks"] if h not in HOOK_NAMES]
    if unknown:
        raise CompileFailed([{"message": f"middleware.{unknown[0]} is not a hook; the hooks are: "
                                         + ", ".join(HOOK_NAMES), "line": 1, "column": 1}])
    if not result["hooks"]:
        raise CompileFailed([{"message": "the plugin defines no hooks: assign handlers to "
                                         "globalThis.middleware.<hook>", "line": 1, "column": 1}])
    try:
        matchers = declare(result.get("match"), result["hooks"], HOOKS)
    except MatcherError as exc:
        raise InvalidInput(exc.path, exc.message) from None
    return {
        "source": source,
        "compiled_js": result["code"],
        "code_hash": hashlib.sha256(result["code"].encode()).hexdigest(),
        "hooks": [h for h in HOOK_NAMES if h in result["hooks"]],
        "matchers": {h: matchers[h] for h in HOOK_NAMES if h in matchers},   # when each handler wants to run
        "host_members": result["hostMembers"],
        # A secret placeholder asks for its own grant (secret:NAME) beside host:fetch's.
        "permissions": derive_permissions(result["hostMembers"]) + secret_permissions(source),
    }


def check_permission_names(grant, asked) -> list[str]:
    """`grant` checked to be a list of permissions among `asked`, sorted and without repeats."""
    if not isinstance(grant, list) or not all(isinstance(g, str) for g in grant):
        raise InvalidInput("grant", "expected an array of permission names")
    extra = sorted(set(grant) - set(asked))
    if extra:
        raise InvalidInput("grant", f"{extra[0]} is not a permission this plugin asks for "
                                    f"(it asks for: {', '.join(sorted(set(asked))) or 'nothing'})")
    return sorted(set(grant))


def _check_grant(plugin: Plugin, grant, installation: Installation | None = None) -> list[str]:
    if grant is None:
        return []
    asked = set(plugin.permissions)
    if installation is not None:   # a draft's new permission can be granted before it is deployed
        for permissions in PluginVersion.objects.filter(installation=installation).values_list("permissions",
                                                                                                flat=True):
            asked.update(permissions)
    return check_permission_names(grant, asked)


def install_plugin(account, *, name: str, source: str, language: str = "typescript",
                   description: str = "", grant=None, typecheck: bool = False, enabled: bool = True) -> Installation:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("name", "a plugin needs a name")
    slug = slugify(name)[:100]
    if not slug:
        raise InvalidInput("name", "the name needs at least one letter or digit")
    if Plugin.objects.filter(account=account, slug=slug).exists():
        raise Conflict(f"a plugin named {slug!r} is already installed in this account")
    compiled = compile_source(source, language, typecheck=typecheck, account=account)   # outside the transaction: it can take a while
    try:
        with transaction.atomic():
            lock_account(account.pk)   # before any write: every writer of the account's chains queues here
            plugin = Plugin.objects.create(account=account, name=name.strip()[:100], slug=slug,
                                           description=description or "", language=language, **compiled)
            return install_existing(account, plugin, grant=grant, enabled=enabled)
    except IntegrityError:
        raise Conflict(f"a plugin named {slug!r} is already installed in this account") from None


@transaction.atomic
def install_existing(account, plugin: Plugin, *, grant=None, settings=None, enabled: bool = True) -> Installation:
    """Install a plugin that is already stored (one of the account's, or an official one)."""
    lock_account(account.pk)
    granted = _check_grant(plugin, grant)
    if Installation.objects.filter(account=account, plugin=plugin).exists():
        raise Conflict(f"{plugin.slug} is already installed in this account")
    if not isinstance(enabled, bool):
        raise InvalidInput("enabled", "expected true or false")
    installation = Installation.objects.create(account=account, plugin=plugin, enabled=enabled,
                                               granted_permissions=granted, settings=settings or {})
    chains.append_to_chains(installation, plugin.hooks)
    chains.mark_changed(account.pk)
    record_installed(installation)
    strike_book.carry_over(installation, timezone.now())   # strikes follow the code across reinstalls
    changes.record(account.pk, AccountChange.Action.INSTALL, f"installed {plugin.slug}", installation=installation,
                   after={"version": installation.live_version, "hooks": plugin.hooks, "granted": granted,
                          "enabled": enabled})
    return installation


def get_installation(account, installation_id, field: str = "installationId") -> Installation:
    return get_in_account(Installation.objects.select_related("plugin"), account, installation_id, field,
                          f"installation {installation_id} not found in this account")


@transaction.atomic
def uninstall(account, installation_id) -> None:
    lock_account(account.pk)
    installation = get_installation(account, installation_id)
    plugin = installation.plugin
    hooks = list(installation.chain_entries.values_list("hook", flat=True))
    changes.record(account.pk, AccountChange.Action.UNINSTALL, f"uninstalled {plugin.slug}",
                   installation=installation, before={"version": installation.live_version,
                                                      "granted": installation.granted_permissions})
    dropped = installation.pk
    installation.delete()
    if plugin.account_id == account.pk and not plugin.installations.exists():
        plugin.delete()
    chains.compact(account.pk, hooks)   # the chains it left keep positions 0..n-1
    chains.mark_changed(account.pk)
    drop_compartments(account.pk, [dropped])


@transaction.atomic
def set_enabled(account, installation_id, enabled: bool) -> Installation:
    lock_account(account.pk)
    installation = get_installation(account, installation_id)
    if not isinstance(enabled, bool):
        raise InvalidInput("enabled", "expected true or false")
    if installation.enabled != enabled:
        action = AccountChange.Action.ENABLE if enabled else AccountChange.Action.DISABLE
        changes.record(account.pk, action, f"{action.label.lower()} {installation.plugin.slug}",
                       installation=installation, before={"enabled": installation.enabled}, after={"enabled": enabled})
    installation.enabled = enabled
    installation.save(update_fields=["enabled", "updated_at"])
    chains.mark_changed(account.pk)
    if not enabled:   # a disabled installation runs nowhere: its compartments would only hold memory
        drop_compartments(account.pk, [installation.pk])
    return installation


@transaction.atomic
def grant(account, installation_id, permissions) -> Installation:
    lock_account(account.pk)
    installation = get_installation(account, installation_id)
    before = installation.granted_permissions
    installation.granted_permissions = _check_grant(installation.plugin, permissions, installation)
    if sorted(before or ()) != installation.granted_permissions:
        changes.record(account.pk, AccountChange.Action.GRANT, f"changed the grants of {installation.plugin.slug}",
                       installation=installation, before={"granted": before},
                       after={"granted": installation.granted_permissions})
    installation.save(update_fields=["granted_permissions", "updated_at"])
    chains.mark_changed(account.pk)
    return installation

"""`hub apply`: make the account match the files through the API, in two rounds (plugins and their code,
then grants, settings, switches and chain orders read back fresh), changing only what differs."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from hub_cli import planning
from hub_cli.client import ApiError, Client
from hub_cli.files import Desired, DesiredPlugin, FileError

Report = Callable[[str], None]


class ApplyError(Exception):
    """A change the hub refused, pointed at the file, line and field it came from."""


def export(client: Client) -> dict:
    return client.get("account/export")


def apply(client: Client, desired: Desired, prune: bool = False, report: Report = print,
          typecheck: bool = True) -> list[dict]:
    done: list[dict] = []
    state = export(client)
    first = planning.plan(desired, state, prune=prune)
    ids = {item["plugin"]: item["installationId"] for item in state["plugins"]}
    for change in first.changes:
        if change.kind in ("install", "code", "uninstall"):
            _guarded(desired, change, partial(_first_round, client, desired, change, ids, typecheck))
            done.append(change.as_dict())
            report(change.summary)
    state = export(client) if done else state
    current = {item["plugin"]: item for item in state["plugins"]}
    ids = {slug: item["installationId"] for slug, item in current.items()}
    second: list[planning.Change] = []
    for slug, wanted in desired.plugins.items():
        if slug in current and bool(wanted.catalog) == current[slug]["official"]:
            second += planning.settings_changes(wanted, current[slug]) + planning.switch_changes(wanted, current[slug])
    for change in second:
        _guarded(desired, change, partial(_second_round, client, desired.plugins[change.target], change, ids))
        done.append(change.as_dict())
        report(change.summary)
    _reorder(client, desired, state, ids, done, report)
    return done


# The calls below are built once, here: `hub plan` sends the very same ones with ?dryRun=true (checking.py).

def install_body(wanted: DesiredPlugin, typecheck: bool) -> dict:
    body: dict = {"grant": wanted.granted}
    if wanted.catalog:
        body.update(catalog=wanted.catalog, settings=wanted.settings)
    else:
        body.update(name=wanted.name, source=wanted.source, language=wanted.language,
                    description=wanted.description, typecheck=typecheck)
    return body


def draft_body(wanted: DesiredPlugin, typecheck: bool) -> dict:
    return {"source": wanted.source, "language": wanted.language, "note": f"hub apply ({wanted.source_file})",
            "typecheck": typecheck}


def deploy_grant(wanted: DesiredPlugin, version: dict) -> list[str]:
    """The files' grants that `version` asks for, granted with its deploy (the others are the grant call's)."""
    return [g for g in wanted.granted if g in version["permissions"]]


def same_version(versions: list[dict], wanted: DesiredPlugin) -> dict | None:
    return next((v for v in versions if planning.same_code(wanted.source, wanted.language, v)), None)


def second_round_call(change: planning.Change, wanted: DesiredPlugin,
                      installation_id: str) -> tuple[str, str, dict]:
    """(method, path, body) of a grant, settings, enable/disable or mode change."""
    if change.kind == "grant":
        return "POST", f"plugins/{installation_id}/grant", {"grant": wanted.granted}
    if change.kind == "settings":
        return "PATCH", f"plugins/{installation_id}/settings", {"settings": change.data["settings"]}
    if change.kind in ("enable", "disable"):
        return "PATCH", f"plugins/{installation_id}", {"enabled": change.kind == "enable"}
    return "PATCH", f"plugins/{installation_id}", {"mode": wanted.mode}


def _first_round(client: Client, desired: Desired, change: planning.Change, ids: dict[str, str],
                 typecheck: bool) -> None:
    if change.kind == "uninstall":
        client.call("DELETE", f"plugins/{ids[change.target]}")
        return
    wanted = desired.plugins[change.target]
    if change.kind == "install":
        ids[wanted.slug] = client.post("plugins", install_body(wanted, typecheck))["installationId"]
        return
    _new_version(client, wanted, ids[wanted.slug], typecheck)


def _new_version(client: Client, wanted: DesiredPlugin, installation_id: str, typecheck: bool) -> None:
    """Deploy the files' code: an earlier version with exactly that code is redeployed, otherwise a new
    version is saved and deployed; no version is ever overwritten, so rollback keeps working."""
    versions = client.get(f"plugins/{installation_id}/versions")["versions"]
    version = same_version(versions, wanted) or client.post(f"plugins/{installation_id}/versions",
                                                            draft_body(wanted, typecheck))
    client.post(f"plugins/{installation_id}/versions/{version['number']}/deploy",
                {"grant": deploy_grant(wanted, version)})


def _second_round(client: Client, wanted: DesiredPlugin, change: planning.Change, ids: dict[str, str]) -> None:
    client.call(*second_round_call(change, wanted, ids[wanted.slug]))


def _reorder(client: Client, desired: Desired, state: dict, ids: dict[str, str], done: list[dict],
             report: Report) -> None:
    mismatch = planning.chain_mismatches(desired, state["chains"])
    if mismatch:
        raise desired.error(*mismatch[0])
    for change in planning.reorders(desired, state["chains"]):
        order = [ids[slug] for slug in change.data["order"]]
        _guarded(desired, change, partial(client.put, f"chains/{change.target}", {"order": order}))
        done.append(change.as_dict())
        report(change.summary)


# The API's field names, as hub.yaml spells them.
_FIELDS = {"grant": "granted", "source": "source", "name": "name", "enabled": "enabled", "mode": "mode",
           "catalog": "catalog", "settings": "settings", "order": ""}


def _guarded(desired: Desired, change: planning.Change, action: Callable[[], object]) -> None:
    try:
        action()
    except ApiError as exc:
        raise located(desired, change, exc) from None


def located(desired: Desired, change: planning.Change, exc: ApiError) -> Exception:
    """The hub's refusal of `change`, pointed at the file, line and field it came from (a FileError), or an
    ApplyError when it is about no file (the hub unreachable, the key refused, the hub failing)."""
    if exc.status in (0, 401) or exc.status >= 500:
        return ApplyError(exc.message or f"HTTP {exc.status}")
    # The file, line and field path say where: the message says only what is wrong, once (the hub's
    # message starts with its own name for the field, which is not the files' name for it).
    message = exc.message.removeprefix(f"{exc.field}: ") if exc.field else exc.message
    if change.kind == "reorder":
        return desired.error(f"chains.{change.target}", message)
    wanted = desired.plugins.get(change.target)
    code_file = str(desired.directory / wanted.source_file) if wanted and wanted.source_file else None
    errors = exc.extra.get("errors")
    if exc.code in ("compile_error", "type_error") and code_file and isinstance(errors, list) and errors:
        first = errors[0]
        return FileError(code_file, first.get("line"), f"plugins.{change.target}.source", str(first.get("message")),
                         column=first.get("column"))
    head, _, rest = (exc.field or "").partition(".")
    if exc.code == "permission_not_granted":
        head, rest = "grant", ""
    elif exc.field and head not in _FIELDS and code_file and change.kind in ("install", "code"):
        # about the code but at no line (a matcher the install probe refused): its file
        return FileError(code_file, None, f"plugins.{change.target}.source", message)
    local = _FIELDS.get(head, "")
    field_path = ".".join(p for p in (f"plugins.{change.target}", local, rest if local else "") if p)
    return desired.error(field_path, message)

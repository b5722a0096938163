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


def apply(client: Client, desired: Desired, prune: bool = False, report: Report = print) -> list[dict]:
    done: list[dict] = []
    state = export(client)
    first = planning.plan(desired, state, prune=prune)
    ids = {item["plugin"]: item["installationId"] for item in state["plugins"]}
    for change in first.changes:
        if change.kind in ("install", "code", "uninstall"):
            _guarded(desired, change, partial(_first_round, client, desired, change, ids))
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


def _first_round(client: Client, desired: Desired, change: planning.Change, ids: dict[str, str]) -> None:
    if change.kind == "uninstall":
        client.call("DELETE", f"plugins/{ids[change.target]}")
        return
    wanted = desired.plugins[change.target]
    if change.kind == "install":
        body: dict = {"grant": wanted.granted}
        if wanted.catalog:
            body.update(catalog=wanted.catalog, settings=wanted.settings)
        else:
            body.update(name=wanted.name, source=wanted.source, language=wanted.language,
                        description=wanted.description)
        ids[wanted.slug] = client.post("plugins", body)["installationId"]
        return
    _new_version(client, wanted, ids[wanted.slug])


def _new_version(client: Client, wanted: DesiredPlugin, installation_id: str) -> None:
    """Deploy the files' code: an earlier version with exactly that code is redeployed, otherwise a new
    version is saved and deployed; no version is ever overwritten, so rollback keeps working."""
    versions = client.get(f"plugins/{installation_id}/versions")["versions"]
    same = [v for v in versions if planning.same_code(wanted.source, wanted.language, v)]
    version = same[0] if same else client.post(f"plugins/{installation_id}/versions", {
        "source": wanted.source, "language": wanted.language, "note": f"hub apply ({wanted.source_file})"})
    grant = [g for g in wanted.granted if g in version["permissions"]]
    client.post(f"plugins/{installation_id}/versions/{version['number']}/deploy", {"grant": grant})


def _second_round(client: Client, wanted: DesiredPlugin, change: planning.Change, ids: dict[str, str]) -> None:
    installation_id = ids[wanted.slug]
    if change.kind == "grant":
        client.post(f"plugins/{installation_id}/grant", {"grant": wanted.granted})
    elif change.kind == "settings":
        client.patch(f"plugins/{installation_id}/settings", {"settings": change.data["settings"]})
    elif change.kind in ("enable", "disable"):
        client.patch(f"plugins/{installation_id}", {"enabled": change.kind == "enable"})
    elif change.kind == "mode":
        client.patch(f"plugins/{installation_id}", {"mode": wanted.mode})


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
        raise _located(desired, change, exc) from None


def _located(desired: Desired, change: planning.Change, exc: ApiError) -> Exception:
    if exc.status == 0 or exc.status == 401:
        return ApplyError(exc.message)
    if change.kind == "reorder":
        return desired.error(f"chains.{change.target}", exc.message)
    wanted = desired.plugins.get(change.target)
    errors = exc.extra.get("errors")
    if exc.code == "compile_error" and wanted and wanted.source_file and isinstance(errors, list) and errors:
        first = errors[0]
        return FileError(str(desired.directory / wanted.source_file), first.get("line"),
                         f"plugins.{change.target}.source", f"column {first.get('column')}: {first.get('message')}")
    api_field = exc.field or ""
    head, _, rest = api_field.partition(".")
    local = _FIELDS.get(head, "")
    field_path = ".".join(p for p in (f"plugins.{change.target}", local, rest if local else "") if p)
    # The file, line and field path already say where: the message says only what is wrong, once (the
    # hub's message may start with its own name for the field).
    message = exc.message
    for prefix in filter(None, (exc.field, api_field)):
        message = message.removeprefix(f"{prefix}: ")
    return desired.error(field_path, message if local else f"{change.summary.lstrip('+~- ')}: {message}")

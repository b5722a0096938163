"""`hub push`, `versions`, `deploy`, `rollback`: one plugin's code and versions, by name."""

from __future__ import annotations

from pathlib import Path

from hub_cli.client import ApiError, Client
from hub_cli.clock import date_time
from hub_cli.files import EXTENSIONS
from hub_cli.files import slug_of as slugify
from hub_cli.planning import same_code
from plugins_app.runtime.source_text import normalised_source


def _installed(client: Client, slug: str) -> dict | None:
    return next((p for p in client.get("plugins")["plugins"] if p["plugin"] == slug), None)


def push(client: Client, file: Path, name: str, deploy: bool, typecheck: bool = True) -> dict:
    """Install the file as a new plugin, or save it as the plugin's next version (deployed with `deploy`);
    code identical to an existing version reuses that version instead of saving a copy. Nothing runs
    without `deploy`: a new plugin is installed disabled (it has no earlier version a draft could sit beside).
    `typecheck` checks a TypeScript file's types as the admin does by default."""
    if file.suffix not in EXTENSIONS:
        raise ApiError(400, f"{file}: expected a .ts or .js file", "invalid", "file")
    source, language = normalised_source(file.read_text(encoding="utf-8")), EXTENSIONS[file.suffix]
    slug = slugify(name)
    plugin = _installed(client, slug)
    if plugin is None:
        installed = client.post("plugins", {"name": name, "source": source, "language": language,
                                            "typecheck": typecheck, "enabled": deploy})
        return {"action": "installed" if deploy else "installed disabled", "plugin": slug,
                "version": installed["liveVersion"], "live": deploy}
    installation_id = plugin["installationId"]
    versions = client.get(f"plugins/{installation_id}/versions")["versions"]
    same = next((v for v in versions if same_code(source, language, v)), None)
    version = same or client.post(f"plugins/{installation_id}/versions",
                                  {"source": source, "language": language, "note": f"hub push {file.name}",
                                   "typecheck": typecheck})
    action = "unchanged" if same else "saved draft"
    if deploy and version["number"] != plugin["liveVersion"]:
        client.post(f"plugins/{installation_id}/versions/{version['number']}/deploy", {})
        action = "deployed"
    if deploy and not plugin["enabled"]:   # a plugin pushed first without --deploy was installed disabled
        client.patch(f"plugins/{installation_id}", {"enabled": True})
        action = "deployed and enabled" if action == "deployed" else "enabled"
    live = (deploy or version["number"] == plugin["liveVersion"]) and (deploy or plugin["enabled"])
    return {"action": action, "plugin": slug, "version": version["number"], "live": live}


def push_summary(answer: dict, name: str) -> str:
    head = f"{answer['plugin']}: {answer['action']} version {answer['version']}"
    if answer["live"]:
        return head + " (live)"
    if answer["action"] == "installed disabled":
        return head + f" (disabled, runs nowhere: hub push FILE --name {name!r} --deploy enables it)"
    return head + f" (draft: hub deploy {name} {answer['version']})"


def versions(client: Client, name: str) -> dict:
    installation_id = client.installation_id(slugify(name))
    answer = client.get(f"plugins/{installation_id}/versions")
    rows = [{k: v[k] for k in ("number", "live", "language", "codeHash", "permissions", "notGranted", "note",
                                "createdBy", "createdAt")} for v in answer["versions"]]
    return {"plugin": slugify(name), "live": answer["live"], "versions": rows}


def deploy(client: Client, name: str, number: int) -> dict:
    installation_id = client.installation_id(slugify(name))
    answer = client.post(f"plugins/{installation_id}/versions/{number}/deploy", {})
    return {"plugin": answer["plugin"]["plugin"], "live": answer["plugin"]["liveVersion"]}


def rollback(client: Client, name: str) -> dict:
    installation_id = client.installation_id(slugify(name))
    answer = client.post(f"plugins/{installation_id}/rollback", {})
    return {"plugin": answer["plugin"]["plugin"], "live": answer["plugin"]["liveVersion"]}


def versions_table(answer: dict) -> str:
    lines = [f"{answer['plugin']}: live version {answer['live']}"]
    for v in answer["versions"]:
        mark = "*" if v["live"] else " "
        missing = f"  needs grant: {', '.join(v['notGranted'])}" if v["notGranted"] else ""
        lines.append(f"{mark} {v['number']:>3}  {date_time(v['createdAt'])}  {v['createdBy'] or '-':<20} "
                     f"{v['codeHash'][:12]}  {v['note']}{missing}")
    return "\n".join(lines)

"""`hub push`, `versions`, `deploy`, `rollback`: one plugin's code and versions, by name."""

from __future__ import annotations

from pathlib import Path

from hub_cli.client import ApiError, Client
from hub_cli.files import EXTENSIONS
from hub_cli.files import slug_of as slugify


def _installed(client: Client, slug: str) -> dict | None:
    return next((p for p in client.get("plugins")["plugins"] if p["plugin"] == slug), None)


def push(client: Client, file: Path, name: str, deploy: bool) -> dict:
    """Install the file as a new plugin, or save it as the plugin's next version (deployed with `deploy`);
    code identical to an existing version reuses that version instead of saving a copy."""
    if file.suffix not in EXTENSIONS:
        raise ApiError(400, f"{file}: expected a .ts or .js file", "invalid", "file")
    source, language = file.read_text(encoding="utf-8"), EXTENSIONS[file.suffix]
    slug = slugify(name)
    plugin = _installed(client, slug)
    if plugin is None:
        installed = client.post("plugins", {"name": name, "source": source, "language": language})
        return {"action": "installed", "plugin": slug, "version": installed["liveVersion"], "live": True}
    installation_id = plugin["installationId"]
    versions = client.get(f"plugins/{installation_id}/versions")["versions"]
    same = next((v for v in versions if v["source"] == source and v["language"] == language), None)
    version = same or client.post(f"plugins/{installation_id}/versions",
                                  {"source": source, "language": language, "note": f"hub push {file.name}"})
    action = "unchanged" if same else "saved draft"
    if deploy and version["number"] != plugin["liveVersion"]:
        client.post(f"plugins/{installation_id}/versions/{version['number']}/deploy", {})
        action = "deployed"
    live = deploy or version["number"] == plugin["liveVersion"]
    return {"action": action, "plugin": slug, "version": version["number"], "live": live}


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
        lines.append(f"{mark} {v['number']:>3}  {v['createdAt'][:19]}  {v['createdBy'] or '-':<20} "
                     f"{v['codeHash'][:12]}  {v['note']}{missing}")
    return "\n".join(lines)

"""`hub push`, `versions`, `deploy`, `rollback`: one plugin's code and versions, by name."""

from __future__ import annotations

import json
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


def deploy(client: Client, name: str, number: int, *, check: int | None = None,
           max_different: float | None = None) -> dict:
    """Deploy version `number`; with `check`, the hub first runs it against that many recorded calls, and
    with `max_different` refuses past that percentage (ApiError code check_failed, carrying the check)."""
    installation_id = client.installation_id(slugify(name))
    body: dict = {}
    if check is not None:
        body["check"] = check
    if max_different is not None:
        body["maxDifferent"] = max_different
    answer = client.post(f"plugins/{installation_id}/versions/{number}/deploy", body)
    found = {"plugin": answer["plugin"]["plugin"], "live": answer["plugin"]["liveVersion"]}
    if "check" in answer:
        found["check"] = answer["check"]
    return found


CHECK_EXAMPLES = 3   # examples of each kind a terminal shows (--json has all the hub sent)


def check_lines(check: dict) -> list[str]:
    """A check's summary, then a few examples of each kind that was not the same, side by side."""
    lines = [f"{check['plugin']} version {check['version']} against {check['summary']}"
             f" ({check['differentPercent']}% not the same)"]
    for kind, examples in check["examples"].items():
        for e in examples[:CHECK_EXAMPLES] if kind != "same" else []:
            live, candidate = e["live"], e["candidate"]
            lines.append(f"  {kind} ({e['hook']}, call {e['callId']}): input {json.dumps(e['input'])[:80]}")
            lines.append(f"    live:      {live['status']} {json.dumps(live['value'])[:80]} {live['reason'] or ''}")
            lines.append(f"    candidate: {candidate['status']} {json.dumps(candidate['value'])[:80]} "
                         f"{candidate['reason'] or ''}")
    return lines


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

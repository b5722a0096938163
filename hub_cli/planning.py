"""What `hub apply` would change: the files compared with the account's export, as a list of changes."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from hub_cli.files import Desired, DesiredPlugin
from plugins_app.runtime.source_text import normalised_source

MAX_DIFF_LINES = 60


@dataclass
class Change:
    kind: str           # install | code | grant | settings | enable | disable | mode | reorder | uninstall
    target: str         # a plugin slug, or a hook for reorder
    summary: str
    details: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "target": self.target, "summary": self.summary, "details": self.details}


@dataclass
class Plan:
    changes: list[Change]
    notes: list[str]

    def as_dict(self) -> dict:
        return {"changes": [c.as_dict() for c in self.changes], "notes": self.notes}


def plan(desired: Desired, state: dict, prune: bool = False) -> Plan:
    """Changes in the order apply makes them: installs and code first, then grants, settings, switches,
    and chain orders last (an install or a deploy can add a plugin to a chain)."""
    current = {item["plugin"]: item for item in state["plugins"]}
    changes: list[Change] = []
    notes: list[str] = []
    for slug, wanted in desired.plugins.items():
        have = current.get(slug)
        if have is None:
            changes.append(_install(wanted))
        else:
            changes.extend(_plugin_changes(wanted, have, notes))
    for slug in sorted(set(current) - set(desired.plugins)):
        if prune:
            changes.append(Change("uninstall", slug, f"- uninstall {slug}"))
        else:
            notes.append(f"{slug} is installed but not in the files: kept (--prune uninstalls it)")
    changes.extend(reorders(desired, _expected_chains(desired, state, changes)))
    return Plan(changes, notes)


def _install(wanted: DesiredPlugin) -> Change:
    what = f"catalog {wanted.catalog}" if wanted.catalog else wanted.source_file
    details = [f"granted: {', '.join(wanted.granted) or '(none)'}"]
    details += [f"settings.{k}: {_short(v)}" for k, v in sorted(wanted.settings.items())]
    if not wanted.enabled:
        details.append("disabled")
    if wanted.mode != "live":
        details.append(f"mode: {wanted.mode}")
    return Change("install", wanted.slug, f"+ install {wanted.slug} ({what})", details)


def _plugin_changes(wanted: DesiredPlugin, have: dict, notes: list[str]) -> list[Change]:
    slug, found = wanted.slug, []
    if bool(wanted.catalog) != have["official"]:
        notes.append(f"{slug}: the files say {'official' if wanted.catalog else 'own'} plugin, the account has "
                     f"{'an official' if have['official'] else 'its own'}; uninstall it first to switch")
        return []
    if wanted.catalog and wanted.version and wanted.version != have.get("catalogVersion"):
        notes.append(f"{slug}: the files name catalog version {wanted.version}, the hub has "
                     f"{have.get('catalogVersion')} (the catalog's version follows the hub: sync_catalog)")
    if not wanted.catalog:
        found += code_changes(wanted, have)
        if wanted.description != have["description"]:
            notes.append(f"{slug}: the description differs; the API cannot change it after install")
    found += settings_changes(wanted, have)
    found += switch_changes(wanted, have)
    return found


def same_code(source: str | None, language: str | None, version: dict) -> bool:
    """The files' code is the version's: compared as the hub keeps code (a version saved before the hub
    normalised line endings may still hold CRLF)."""
    return (version["language"] == language and source is not None
            and normalised_source(version.get("source") or "") == normalised_source(source))


def code_changes(wanted: DesiredPlugin, have: dict) -> list[Change]:
    if same_code(wanted.source, wanted.language, have):
        return []
    diff = list(difflib.unified_diff((have.get("source") or "").splitlines(), (wanted.source or "").splitlines(),
                                     f"{wanted.slug} (live, version {have['liveVersion']})", wanted.source_file or "",
                                     lineterm="", n=2))
    if len(diff) > MAX_DIFF_LINES:
        diff = diff[:MAX_DIFF_LINES] + [f"... {len(diff) - MAX_DIFF_LINES} more lines"]
    return [Change("code", wanted.slug, f"~ {wanted.slug}: new version, deployed (was version {have['liveVersion']})",
                   diff)]


def settings_changes(wanted: DesiredPlugin, have: dict) -> list[Change]:
    # Only keys the files name: a key left out keeps its value (secret settings are never exported).
    differ = {k: v for k, v in sorted(wanted.settings.items()) if have["settings"].get(k, _MISSING) != v}
    if not differ:
        return []
    details = [f"settings.{k}: {_short(have['settings'].get(k))} -> {_short(v)}" for k, v in differ.items()]
    return [Change("settings", wanted.slug, f"~ {wanted.slug}: settings ({', '.join(differ)})", details,
                   {"settings": differ})]


def switch_changes(wanted: DesiredPlugin, have: dict) -> list[Change]:
    found = []
    if wanted.granted != sorted(have["granted"]):
        found.append(Change("grant", wanted.slug, f"~ {wanted.slug}: grant "
                            f"[{', '.join(sorted(have['granted']))}] -> [{', '.join(wanted.granted)}]"))
    if wanted.enabled != have["enabled"]:
        kind = "enable" if wanted.enabled else "disable"
        found.append(Change(kind, wanted.slug, f"~ {wanted.slug}: {kind}"))
    if wanted.mode != have["mode"]:
        found.append(Change("mode", wanted.slug, f"~ {wanted.slug}: mode {have['mode']} -> {wanted.mode}"))
    return found


def _expected_chains(desired: Desired, state: dict, changes: list[Change]) -> dict[str, list[str]]:
    """The chains as they will be before any reorder: an uninstalled plugin leaves them, a new one
    joins the end of each chain the files list it in (its hooks are known only once compiled)."""
    gone = {c.target for c in changes if c.kind == "uninstall"}
    new = [c.target for c in changes if c.kind == "install"]
    chains = {hook: [s for s in order if s not in gone] for hook, order in state["chains"].items()}
    for slug in new:
        for hook, order in desired.chains.items():
            if slug in order:
                chains.setdefault(hook, []).append(slug)
    return chains


def reorders(desired: Desired, chains: dict[str, list[str]]) -> list[Change]:
    found = []
    for hook, order in desired.chains.items():
        have = chains.get(hook, [])
        if have != order and sorted(have) == sorted(order):
            found.append(Change("reorder", hook, f"~ reorder {hook}: {', '.join(have)} -> {', '.join(order)}",
                                data={"order": order}))
    return found


def chain_mismatches(desired: Desired, chains: dict[str, list[str]]) -> list[tuple[str, str]]:
    """(field, message) for each chain in the files that names other plugins than the account's chain holds."""
    found = []
    for hook, order in desired.chains.items():
        have = chains.get(hook, [])
        extra, missing = sorted(set(order) - set(have)), sorted(set(have) - set(order))
        if extra:
            found.append((f"chains.{hook}", f"{extra[0]} has no {hook} handler (the chain holds: "
                                            f"{', '.join(have) or 'nothing'})"))
        elif missing:
            found.append((f"chains.{hook}", f"{missing[0]} is in the {hook} chain; list every plugin in it"))
    return found


_MISSING = object()


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def render(result: Plan, refused: int = 0) -> str:
    """The plan as text; `refused` changes the hub would refuse are left out of it (the caller prints why)."""
    lines = []
    for change in result.changes:
        lines.append(change.summary)
        lines.extend(f"    {d}" for d in change.details)
    if refused:
        lines.append(f"{len(result.changes)} change(s); {refused} refused by the hub (below): "
                     "apply would stop at the first")
    elif result.changes:
        lines.append(f"{len(result.changes)} change(s)")
    else:
        lines.append("no changes")
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)

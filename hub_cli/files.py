"""The account as files: hub.yaml (installations, chain orders) and plugins/<slug>.ts|.js, written
deterministically and read back with each value's line, so a bad file is refused by file, line and field."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from plugins_app.runtime.source_text import normalised_source
from plugins_app.runtime.tables.hooks import HOOK_NAMES

STATE_FILE = "hub.yaml"
PLUGINS_DIR = "plugins"
EXTENSIONS = {".ts": "typescript", ".js": "javascript"}
SUFFIX = {language: ext for ext, language in EXTENSIONS.items()}
HEADER = ("# Middleware Hub account state, written by `hub export`. `hub plan` shows what `hub apply`\n"
          "# would change to make the account match it. Custom plugins' code is in plugins/.\n")
SLUG = re.compile(r"^[-a-zA-Z0-9_]+$")
PLUGIN_KEYS = {"catalog", "version", "name", "description", "source", "enabled", "mode", "granted", "settings"}
MODES = ("live", "shadow")


def slug_of(name: str) -> str:
    """The slug the hub gives a plugin named `name` (Django's slugify, which the server uses, cut at 100):
    the CLI needs no Django."""
    value = unicodedata.normalize("NFKD", str(name)).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value.lower())
    return re.sub(r"[-\s]+", "-", value).strip("-_")[:100]


class FileError(Exception):
    """A file that does not validate: where (file, line and, in code, column), which field, and why."""

    def __init__(self, path: str, line: int | None, field_path: str, message: str, column: int | None = None):
        where = path + (f":{line}" if line else "") + (f":{column}" if line and column else "")
        super().__init__(f"{where}: {field_path}: {message}")
        self.path, self.line, self.column, self.field, self.message = path, line, column, field_path, message

    def as_dict(self) -> dict:
        return {"file": self.path, "line": self.line, "column": self.column, "field": self.field,
                "message": self.message}


@dataclass
class DesiredPlugin:
    slug: str
    enabled: bool = True
    mode: str = "live"
    granted: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    catalog: str | None = None          # an official plugin, by its catalog slug
    version: str | None = None          # an official plugin's catalog version (informational)
    name: str = ""
    description: str = ""
    source: str | None = None           # a custom plugin's code, read from its file
    source_file: str | None = None      # relative to the directory
    language: str | None = None


@dataclass
class Desired:
    directory: Path
    plugins: dict[str, DesiredPlugin]
    chains: dict[str, list[str]]
    lines: dict[str, int]               # "plugins.x.enabled" -> its line in hub.yaml

    def line(self, field_path: str) -> int | None:
        """The line of `field_path`, or of the nearest enclosing field that has one."""
        parts = field_path.split(".")
        while parts:
            found = self.lines.get(".".join(parts))
            if found:
                return found
            parts.pop()
        return None

    def error(self, field_path: str, message: str) -> FileError:
        return FileError(str(self.directory / STATE_FILE), self.line(field_path), field_path, message)


# --- writing ---------------------------------------------------------------------------------------

class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def state_document(state: dict) -> dict:
    """The server's export, as hub.yaml holds it (key order fixed here, not by the server)."""
    plugins: dict[str, dict] = {}
    for item in sorted(state["plugins"], key=lambda p: p["plugin"]):
        entry: dict[str, Any] = {}
        if item["official"]:
            entry.update(catalog=item["plugin"], version=item.get("catalogVersion"))
        else:
            entry.update(name=item["name"], description=item["description"],
                         source=f"{PLUGINS_DIR}/{item['plugin']}{SUFFIX[item['language']]}")
        entry.update(enabled=item["enabled"], mode=item["mode"], granted=sorted(item["granted"]))
        if item["official"] or item["settings"]:
            entry["settings"] = dict(sorted(item["settings"].items()))
        plugins[item["plugin"]] = entry
    chains = {hook: list(state["chains"][hook]) for hook in HOOK_NAMES if hook in state["chains"]}
    return {"plugins": plugins, "chains": chains}


def _previous_sources(directory: Path) -> set[str]:
    """The code files the hub.yaml about to be replaced pointed at (a file it did not name is not ours)."""
    try:
        plugins = (yaml.safe_load((directory / STATE_FILE).read_text(encoding="utf-8")) or {}).get("plugins") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return set()
    return {entry["source"] for entry in plugins.values() if isinstance(entry, dict) and isinstance(
        entry.get("source"), str)}


@dataclass
class Written:
    """What an export did: every file it stands for, the ones whose bytes changed, the ones it removed."""
    files: list[Path] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)

    def summary(self, directory: Path) -> str:
        if not self.written and not self.removed:
            return f"{directory}: up to date ({len(self.files)} file(s), none changed)"
        parts = [f"wrote {len(self.written)} of {len(self.files)} file(s)"]
        if self.removed:
            parts.append(f"removed {len(self.removed)}")
        return f"{directory}: " + ", ".join(parts)


def write(directory: Path, state: dict) -> Written:
    """Write hub.yaml and one file per custom plugin; a code file the previous hub.yaml named and the
    account no longer has goes (files it did not name are left alone)."""
    directory.mkdir(parents=True, exist_ok=True)
    previous = _previous_sources(directory)
    text = HEADER + yaml.dump(state_document(state), Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                              default_flow_style=False, width=100)
    result = Written()
    _write_if_changed(directory / STATE_FILE, text, result)
    plugin_dir = directory / PLUGINS_DIR
    wanted = set()
    for item in state["plugins"]:
        if not item["official"]:
            path = plugin_dir / f"{item['plugin']}{SUFFIX[item['language']]}"
            plugin_dir.mkdir(exist_ok=True)
            _write_if_changed(path, normalised_source(item["source"]), result)
            wanted.add(path.name)
    for source in previous:
        stale = directory / source
        if stale.parent == plugin_dir and stale.name not in wanted and stale.suffix in EXTENSIONS and stale.exists():
            stale.unlink()
            result.removed.append(stale)
    return result


def _write_if_changed(path: Path, text: str, result: Written) -> None:
    # An unchanged file keeps its mtime: editors and `make` see nothing happened. Compared as bytes: a
    # CRLF file read as text would look the same as the LF text about to replace it.
    result.files.append(path)
    if not path.exists() or path.read_bytes() != text.encode("utf-8"):
        path.write_text(text, encoding="utf-8", newline="")
        result.written.append(path)


# --- reading ---------------------------------------------------------------------------------------

def _plain(node: yaml.Node, where: str, lines: dict[str, int]) -> Any:
    """A composed YAML node as plain data, noting each field's line (1-based) under its dotted path."""
    lines.setdefault(where, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        result = {}
        for key_node, value_node in node.value:
            key = str(yaml.safe_load(yaml.serialize(key_node)))
            path = f"{where}.{key}" if where else key
            lines[path] = key_node.start_mark.line + 1
            result[key] = _plain(value_node, path, lines)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_plain(item, f"{where}.{i}", lines) for i, item in enumerate(node.value)]
    return yaml.safe_load(yaml.serialize(node))


def read(directory: Path) -> Desired:
    path = directory / STATE_FILE
    if not path.exists():
        raise FileError(str(path), None, "(file)", "not found; `hub export DIR` writes one")
    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise FileError(str(path), mark.line + 1 if mark else None, "(syntax)",
                        str(getattr(exc, "problem", exc))) from None
    lines: dict[str, int] = {}
    data = {} if node is None else _plain(node, "", lines)
    desired = Desired(directory, {}, {}, lines)
    if not isinstance(data, dict):
        raise desired.error("(top)", "expected a mapping with plugins: and chains:")
    unknown = sorted(set(data) - {"plugins", "chains"})
    if unknown:
        raise desired.error(unknown[0], "unknown key (expected plugins and chains)")
    plugins = _mapping(desired, "plugins", data.get("plugins") or {})
    for slug, entry in plugins.items():
        desired.plugins[slug] = _plugin(desired, slug, entry)
    for hook, order in _mapping(desired, "chains", data.get("chains") or {}).items():
        desired.chains[hook] = _chain(desired, hook, order)
    return desired


def _mapping(desired: Desired, where: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise desired.error(where, "expected a mapping")
    return value


def _plugin(desired: Desired, slug: str, entry: Any) -> DesiredPlugin:
    where = f"plugins.{slug}"
    if not SLUG.match(slug):
        raise desired.error(where, "a plugin's key is its slug: letters, digits, - and _")
    entry = _mapping(desired, where, entry)
    unknown = sorted(set(entry) - PLUGIN_KEYS)
    if unknown:
        raise desired.error(f"{where}.{unknown[0]}", f"unknown key (expected: {', '.join(sorted(PLUGIN_KEYS))})")
    plugin = DesiredPlugin(slug)
    if ("catalog" in entry) == ("source" in entry):
        raise desired.error(where, "give either catalog: (an official plugin) or source: (your own plugin's file)")
    plugin.enabled = _typed(desired, f"{where}.enabled", entry.get("enabled", True), bool, "true or false")
    plugin.mode = entry.get("mode", "live")
    if plugin.mode not in MODES:
        raise desired.error(f"{where}.mode", "expected live or shadow")
    granted = entry.get("granted") or []
    if not isinstance(granted, list) or not all(isinstance(g, str) for g in granted):
        raise desired.error(f"{where}.granted", "expected a list of permission names")
    plugin.granted = sorted(set(granted))
    plugin.settings = _mapping(desired, f"{where}.settings", entry.get("settings") or {})
    if "catalog" in entry:
        plugin.catalog = _typed(desired, f"{where}.catalog", entry["catalog"], str, "the catalog slug")
        if plugin.catalog != slug:
            raise desired.error(f"{where}.catalog", f"an official plugin's key is its catalog slug ({plugin.catalog})")
        version = entry.get("version")
        plugin.version = None if version is None else str(version)
        return plugin
    _own_plugin(desired, where, plugin, entry)
    return plugin


def _own_plugin(desired: Desired, where: str, plugin: DesiredPlugin, entry: dict) -> None:
    plugin.name = _typed(desired, f"{where}.name", entry.get("name", plugin.slug), str, "a string")
    plugin.description = _typed(desired, f"{where}.description", entry.get("description") or "", str, "a string")
    if slug_of(plugin.name) != plugin.slug:
        raise desired.error(f"{where}.name", f"the name {plugin.name!r} makes the slug {slug_of(plugin.name)!r}, "
                                             f"not {plugin.slug!r}")
    if plugin.settings:
        raise desired.error(f"{where}.settings", "only official (catalog) plugins take settings")
    source_file = _typed(desired, f"{where}.source", entry["source"], str, "a path to a .ts or .js file")
    path = (desired.directory / source_file)
    if path.suffix not in EXTENSIONS:
        raise desired.error(f"{where}.source", "expected a .ts or .js file")
    if not path.is_file():
        raise desired.error(f"{where}.source", f"{source_file} does not exist")
    plugin.source_file, plugin.language = source_file, EXTENSIONS[path.suffix]
    plugin.source = normalised_source(path.read_text(encoding="utf-8"))


def _typed(desired: Desired, where: str, value: Any, kind: type, expected: str) -> Any:
    if not isinstance(value, kind):
        raise desired.error(where, f"expected {expected}")
    return value


def _chain(desired: Desired, hook: str, order: Any) -> list[str]:
    where = f"chains.{hook}"
    if hook not in HOOK_NAMES:
        raise desired.error(where, f"not a hook; the hooks are: {', '.join(HOOK_NAMES)}")
    if not isinstance(order, list) or not all(isinstance(s, str) for s in order):
        raise desired.error(where, "expected a list of plugin slugs, first to run first")
    for i, slug in enumerate(order):
        if slug not in desired.plugins:
            raise desired.error(f"{where}.{i}", f"{slug} is not under plugins:")
        if order.index(slug) != i:
            raise desired.error(f"{where}.{i}", f"{slug} appears twice")
    return order

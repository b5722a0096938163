"""The direction of imports: accounts knows nothing of plugins_app, the runtime knows nothing of Django,
and the services never import the Celery tasks that call them."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(folder: str) -> dict[str, set[str]]:
    """Every module each .py file under `folder` imports (absolute names; relative ones resolved)."""
    found = {}
    for path in (ROOT / folder).rglob("*.py"):
        if "migrations" in path.parts:
            continue
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                module = ".".join(part for part in (base, node.module) if part)
                names.add(module)
                names.update(f"{module}.{alias.name}" for alias in node.names)
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize(("folder", "forbidden"), [
    ("accounts", "plugins_app"),
    ("plugins_app/runtime", "django"),
    ("plugins_app/runtime", "rest_framework"),
    ("plugins_app/services", "plugins_app.tasks"),
    ("plugins_app/services", "plugins_app.api"),
    ("plugins_app/services", "plugins_app.admin"),
    ("plugins_app/runtime/tables", "plugins_app.runtime.engine"),
    ("plugins_app/runtime/tables", "plugins_app.runtime.web"),
    ("plugins_app/runtime/engine", "plugins_app.runtime.web"),
])
def test_no_module_imports_against_the_direction(folder, forbidden):
    offenders = {path: sorted(n for n in names if n == forbidden or n.startswith(forbidden + "."))
                 for path, names in imported_modules(folder).items()}
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_check_sees_imports_written_inside_functions(tmp_path, monkeypatch):
    # A local import (inside a function) hid two of the import circles issue 27 removed; it must count.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "late.py").write_text("def f():\n    from . import early\n    import os.path\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert {"pkg.early", "os.path"} <= imported_modules("pkg")["pkg/late.py"]


# The services' capabilities, lowest first: each may import those before it, never one after it.
SERVICE_LAYERS = ["audit", "engine", "secrets", "plugins", "kv", "execution", "observability", "ssh", "host", "scheduling",
                  "versions"]


def _package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] == ["plugins_app", "services"] and len(parts) > 2 and parts[2] in SERVICE_LAYERS:
        return parts[2]
    return None


def test_service_packages_import_only_the_layers_below_them():
    against = {}
    for path, names in imported_modules("plugins_app/services").items():
        own = _package_of(path.removesuffix(".py").replace("/", "."))
        if own is None:   # the shared modules at the top (ids, inputs, hooks) import no capability
            assert {n for n in names if _package_of(n)} == set(), path
            continue
        above = {n for n in names if _package_of(n) and
                 SERVICE_LAYERS.index(_package_of(n)) > SERVICE_LAYERS.index(own)}
        if above:
            against[path] = sorted(above)
    assert against == {}


def test_every_capability_folder_is_in_the_layer_order():
    folders = {p.name for p in (ROOT / "plugins_app/services").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(SERVICE_LAYERS)


def _module_graph(folder: str) -> dict[str, set[str]]:
    modules = {path.removesuffix(".py").removesuffix("/__init__").replace("/", "."): names
               for path, names in imported_modules(folder).items()}
    return {module: {n for n in names if n in modules and n != module} for module, names in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in `graph`, if there is any (a depth-first search for a back edge)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_plugins_app_has_no_import_circle():
    # Package __init__ modules are left out: importing a submodule runs its package's __init__, but an
    # __init__ that imports its own pages (the admin's) is not a circle between capabilities.
    graph = {m: {n for n in deps if not n.endswith("__init__")} for m, deps in _module_graph("plugins_app").items()}
    assert _cycle(graph) is None


def test_the_circle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


MAX_MODULES_PER_FOLDER = 15


def test_no_folder_holds_more_than_fifteen_modules():
    crowded = {}
    for folder in ["accounts", "middleware_hub", "plugins_app"]:
        for directory in [ROOT / folder, *(p for p in (ROOT / folder).rglob("*") if p.is_dir())]:
            if "migrations" in directory.parts or "node_modules" in directory.parts:
                continue
            count = len([p for p in directory.glob("*.py") if p.name != "__init__.py"])
            if count > MAX_MODULES_PER_FOLDER:
                crowded[str(directory.relative_to(ROOT))] = count
    assert crowded == {}

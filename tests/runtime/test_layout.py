"""The runtime's layout: its folders import in one direction, and each folder's README says what lives there."""

from tests.middleware_hub.test_dependencies import ROOT, imported_modules

RUNTIME = ROOT / "plugins_app/runtime"
FOLDERS = ("tables", "engine", "web", "matching")
SHARED = ("config", "environment", "launch", "positions", "protocol", "pulse", "source_text", "wire")   # the modules at the top, which both sides share


def _offenders(folder: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found = {path: sorted(n for n in names if n.startswith(forbidden))
             for path, names in imported_modules(folder).items()}
    return {path: names for path, names in found.items() if names}


def test_the_shared_modules_import_none_of_the_folders():
    folders = tuple(f"plugins_app.runtime.{folder}" for folder in FOLDERS)
    shared = {f"plugins_app/runtime/{name}.py" for name in SHARED}
    assert {p: n for p, n in _offenders("plugins_app/runtime", folders).items() if p in shared} == {}


def test_the_web_side_never_imports_the_engine_side():
    # The other directions (engine -> web, tables -> either) are in test_dependencies.
    assert _offenders("plugins_app/runtime/web", ("plugins_app.runtime.engine",)) == {}


def test_the_runtime_imports_nothing_else_of_plugins_app():
    found = {path: sorted(n for n in names if n.startswith("plugins_app.") and not n.startswith("plugins_app.runtime"))
             for path, names in imported_modules("plugins_app/runtime").items()}
    assert {path: names for path, names in found.items() if names} == {}


def test_the_shared_modules_are_the_ones_the_readme_names():
    top = {p.stem for p in RUNTIME.glob("*.py") if p.name != "__init__.py"}
    assert top == set(SHARED)
    readme = (RUNTIME / "README.md").read_text()
    assert [name for name in SHARED if f"`{name}.py`" not in readme] == []


def test_every_runtime_folder_has_a_readme():
    folders = [p for p in RUNTIME.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert sorted(p.name for p in folders) == sorted((*FOLDERS, "js"))   # a new folder is named here too
    assert [p.name for p in (RUNTIME, *folders) if not (p / "README.md").exists()] == []

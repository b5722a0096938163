"""mini-racer (its public names and its private modules, `_exc`, `_context`, `_value_handle`) is imported by
two modules only, runtime/engine/isolate.py and v8_queue.py; the rest of the hub takes its types from
isolate.py, so a mini-racer upgrade that moves a private name touches those two."""

from tests.middleware_hub import test_dependencies
from tests.middleware_hub.test_dependencies import imported_modules

ALLOWED = {"plugins_app/runtime/engine/isolate.py", "plugins_app/runtime/engine/v8_queue.py"}
PRODUCT = ["accounts", "plugins_app", "middleware_hub", "hub_cli", "bench"]


def mini_racer_importers(folders: list[str]) -> dict[str, list[str]]:
    found = {}
    for folder in folders:
        for path, names in imported_modules(folder).items():
            racer = sorted(n for n in names if n == "py_mini_racer" or n.startswith("py_mini_racer."))
            if racer:
                found[path] = racer
    return found


def test_only_the_isolate_and_the_v8_queue_import_mini_racer():
    importers = mini_racer_importers(PRODUCT)
    assert {path: names for path, names in importers.items() if path not in ALLOWED} == {}
    assert set(importers) == ALLOWED   # the check looks where mini-racer is


def test_the_check_finds_a_private_mini_racer_import_written_inside_a_function(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "late.py").write_text("def f():\n    from py_mini_racer._exc import JSOOMException\n")
    monkeypatch.setattr(test_dependencies, "ROOT", tmp_path)
    assert mini_racer_importers(["pkg"]) == {"pkg/late.py": ["py_mini_racer._exc", "py_mini_racer._exc.JSOOMException"]}

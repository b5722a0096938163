"""The direction of imports: accounts knows nothing of plugins_app, the runtime knows nothing of Django,
and the services never import the Celery tasks that call them."""

import ast
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
])
def test_no_module_imports_against_the_direction(folder, forbidden):
    offenders = {path: sorted(n for n in names if n == forbidden or n.startswith(forbidden + "."))
                 for path, names in imported_modules(folder).items()}
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_check_sees_imports_written_inside_functions():
    # cron.py once imported plugins_app.tasks inside a function; such an import must count.
    names = imported_modules("plugins_app/services")["plugins_app/services/cron.py"]
    assert "plugins_app.services.task_queue" in names

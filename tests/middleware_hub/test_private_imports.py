"""A name with a leading underscore is its package's own: no module of the project imports another
package's `_private` names (issue 37: five API packages imported `_AuditListView` and `_validated`
from the plugins views; what packages share lives in a public module such as `api/base.py`).

Between modules of one package a private name may pass (`from .views import _helper`); a subpackage
is another package. Only the project's own packages are judged here: which modules may import
mini-racer's private modules is a rule of its own (the runtime's engine)."""

import ast
import tomllib
from pathlib import Path

from tests.middleware_hub import test_dependencies

PACKAGES = ("plugins_app", "accounts", "middleware_hub", "hub_cli")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path, root: Path) -> tuple[str, str]:
    """(module, package) of a .py file: module c in folder b of a is (`a.b.c`, `a.b`); the __init__.py
    of folder b is (`a.b`, `a.b`)."""
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def _package_holding(dotted: str, root: Path) -> str:
    """The package a dotted name belongs to: itself when it is a package, else its parent."""
    if (root / dotted.replace(".", "/") / "__init__.py").exists():
        return dotted
    return dotted.rpartition(".")[0]


def _imported_names(tree: ast.AST, package: str):
    """(line, full dotted name) of everything a module imports, relative imports resolved."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def private_imports(root: Path, packages=PACKAGES) -> list[str]:
    """`file:line: name` for each import of a private name (a module, class, function, ...) of one of
    `packages` by a module outside the package that holds it."""
    found = []
    for top in packages:
        for path in sorted((root / top).rglob("*.py")):
            if "node_modules" in path.parts:
                continue
            _, package = _module_name(path, root)
            tree = ast.parse(path.read_text(), str(path))
            for line, dotted in _imported_names(tree, package):
                parts = dotted.split(".")
                if parts[0] not in packages:
                    continue
                for index, part in enumerate(parts):
                    owner = ".".join(parts[:index])
                    if _is_private(part) and _package_holding(owner, root) != package:
                        found.append(f"{path.relative_to(root)}:{line}: {dotted}")
                        break
    return found


def test_no_module_imports_another_packages_private_names():
    assert private_imports(test_dependencies.ROOT) == []


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_check_finds_private_names_taken_across_packages(tmp_path):
    _write(tmp_path, {
        "app/__init__.py": "",
        "app/api/__init__.py": "",
        "app/api/plugins/__init__.py": "",
        "app/api/plugins/views.py": "def _validated(): ...\n",
        "app/api/plugins/_shapes.py": "",
        "app/api/ssh/__init__.py": "",
        "app/api/ssh/views.py": (
            "from app.api.plugins.views import _validated\n"      # another package's function
            "from ..plugins import _shapes\n"                       # another package's private module
            "def f():\n    import app.api.plugins._shapes\n"       # inside a function, as a module path
            "from app.api.plugins.views import __doc__\n"),        # a dunder is nobody's secret
    })
    assert private_imports(tmp_path, ("app",)) == [
        "app/api/ssh/views.py:1: app.api.plugins.views._validated",
        "app/api/ssh/views.py:2: app.api.plugins._shapes",
        "app/api/ssh/views.py:4: app.api.plugins._shapes",
    ]


def test_private_names_pass_between_modules_of_one_package_but_not_into_a_subpackage(tmp_path):
    _write(tmp_path, {
        "app/__init__.py": "",
        "app/api/__init__.py": "from ._edge import check\nfrom .views import _helper\n",
        "app/api/_edge.py": "def check(): ...\n",
        "app/api/views.py": "def _helper(): ...\nfrom . import _edge\nfrom app.api._edge import check\n",
        "app/api/audit/__init__.py": "",
        "app/api/audit/views.py": "from ..views import _helper\n",
        "app/other.py": "from app.api.views import _helper\n",
        "lib/__init__.py": "",
        "lib/tool.py": "from app.api._edge import check\nfrom os import _exit\n",   # os is not the project's
    })
    assert private_imports(tmp_path, ("app", "lib")) == [
        "app/api/audit/views.py:1: app.api.views._helper",
        "app/other.py:1: app.api.views._helper",
        "lib/tool.py:1: app.api._edge.check",
    ]


def test_the_packages_judged_are_the_ones_mypy_checks():
    # A new top-level package joins mypy's `files` and this check together.
    config = tomllib.loads((test_dependencies.ROOT / "pyproject.toml").read_text())
    assert sorted(config["tool"]["mypy"]["files"]) == sorted(PACKAGES)

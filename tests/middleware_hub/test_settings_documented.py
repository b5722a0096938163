"""Every environment variable the hub reads has a row in docs/configuration.md's table, and every row
names a variable the hub still reads.

The variables are found in the code at run time, never listed here: a setting added, renamed, removed
or turned into a constant shows up on the next run. A read counts when its name is a string literal:
`os.environ.get("X")`, `os.environ["X"]`, `os.environ.setdefault("X", ...)`, `"X" in os.environ`,
`os.getenv("X")`, a call of any function or method that hands one of its parameters to such a read
(`Env(environ).flag("X", ...)`, `Env(environ).integer("X", ...)`, ...: found by following the code,
so a new helper needs no change here), `dj_database_url.config()` (`DATABASE_URL`), and
`${X:-default}` in the shell scripts of `bin/`. A read whose name the code computes cannot be checked,
so it fails too.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
TABLE_SECTION = "## Environment variables"
# The hub's own code: its packages, the files Django and gunicorn start from, and bin/.
PACKAGES = ("middleware_hub", "accounts", "plugins_app")
TOP_LEVEL_FILES = ("gunicorn.conf.py", "manage.py")
SCRIPTS_DIR = "bin"

NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
SHELL_READ = re.compile(r"\$\{([A-Z][A-Z0-9_]*):?[-=?+]")
# Libraries the hub calls that read a variable of their own on its behalf.
LIBRARY_READS = {("dj_database_url", "config"): ("env", "DATABASE_URL")}


def python_sources() -> list[Path]:
    files = [ROOT / name for name in TOP_LEVEL_FILES if (ROOT / name).exists()]
    for package in PACKAGES:
        files += [p for p in sorted((ROOT / package).rglob("*.py")) if "node_modules" not in p.parts]
    return files


def shell_sources() -> list[Path]:
    scripts = sorted(p for p in (ROOT / SCRIPTS_DIR).glob("*") if p.is_file())
    return [p for p in scripts if not p.read_text(errors="replace").startswith("#!/usr/bin/env python")]


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{dotted(node.func)}()"
    return "?"


def is_environ(node: ast.AST) -> bool:
    """os.environ, environ, self.environ, self._environ ... (a mapping of the process's variables)."""
    return dotted(node).split(".")[-1].lstrip("_") == "environ"


def called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


@dataclass
class Reader:
    """A function that reads the variable named by some of its parameters."""
    params: list[str]
    method: bool                       # its first parameter is self/cls: a call's arguments start at the second
    reads: set[str] = field(default_factory=set)   # the parameters whose value is a variable's name

    def names_in(self, call: ast.Call, modules: set[str]) -> list[ast.expr]:
        """The arguments of `call` that name a variable; none when `call` is another function of that
        name (a method reader is called on an object, never on an imported module: `secrets.choice`)."""
        on_module = isinstance(call.func, ast.Attribute) and dotted(call.func.value) in modules
        if self.method and (on_module or isinstance(call.func, ast.Name)):
            return []
        offset = 1 if self.method else 0
        args = [a for i, a in enumerate(call.args) if i + offset < len(self.params)
                and self.params[i + offset] in self.reads]
        return args + [k.value for k in call.keywords if k.arg in self.reads]


@dataclass
class Read:
    name: str | None       # None: computed, can't be checked
    where: str


def direct_key(node: ast.AST) -> ast.expr | None:
    """The key expression when `node` reads the environment mapping directly, else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        if node.func.attr in ("get", "setdefault", "pop") and is_environ(node.func.value):
            return node.args[0]
        if dotted(node.func) == "os.getenv":
            return node.args[0]
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and is_environ(node.value):
        return node.slice
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and is_environ(node.comparators[0])):
        return node.left
    return None


def imported_modules(tree: ast.Module) -> set[str]:
    return {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names}


def find_readers(trees: dict[Path, ast.Module]) -> dict[str, Reader]:
    """Functions that pass a parameter to an environment read or to another such function, to a fixed point."""
    functions = [(f, imported_modules(tree)) for tree in trees.values() for f in ast.walk(tree)
                 if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    readers: dict[str, Reader] = {}
    changed = True
    while changed:
        changed = False
        for function, modules in functions:
            params = [a.arg for a in function.args.posonlyargs + function.args.args + function.args.kwonlyargs]
            reader = Reader(params, bool(params) and params[0] in ("self", "cls"))
            for node in ast.walk(function):
                keys = [direct_key(node)]
                if isinstance(node, ast.Call) and called_name(node) in readers:
                    keys += readers[called_name(node)].names_in(node, modules)
                reader.reads |= {k.id for k in keys if isinstance(k, ast.Name) and k.id in params}
            known = readers.get(function.name)
            if reader.reads and (known is None or not reader.reads <= known.reads):
                if known is not None:
                    reader.reads |= known.reads
                readers[function.name] = reader
                changed = True
    return readers


def python_reads() -> list[Read]:
    trees = {path: ast.parse(path.read_text(), str(path)) for path in python_sources()}
    readers = find_readers(trees)
    reads = []
    for path, tree in trees.items():
        modules = imported_modules(tree)
        parameters = {a.arg for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                      for a in f.args.posonlyargs + f.args.args + f.args.kwonlyargs}
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            keys, indirect = [], []
            if (key := direct_key(node)) is not None:
                keys.append(key)
            if isinstance(node, ast.Call):
                name = called_name(node)
                if name in readers:
                    indirect += readers[name].names_in(node, modules)
                library = LIBRARY_READS.get(tuple(dotted(node.func).split(".")[-2:]))
                if library is not None:
                    keyword, default = library
                    given = [k.value for k in node.keywords if k.arg == keyword]
                    keys += given or [ast.Constant(default)]
            for key in keys + indirect:
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and NAME.match(key.value):
                    reads.append(Read(key.value, where))
                elif isinstance(key, ast.Name) and key.id in parameters:
                    continue   # a helper's own parameter: its callers' literals are the reads
                elif key in keys and not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    reads.append(Read(None, f"{where}: {ast.unparse(key)}"))
    return reads


def shell_reads() -> list[Read]:
    return [Read(m.group(1), f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}")
            for path in shell_sources() for text in [path.read_text()] for m in SHELL_READ.finditer(text)]


def variables_read() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for read in python_reads() + shell_reads():
        if read.name is not None:
            found.setdefault(read.name, []).append(read.where)
    return found


def documented() -> dict[str, list[str]]:
    """Variable -> its table row's cells, from the table(s) of the section TABLE_SECTION."""
    text = DOC.read_text()
    assert TABLE_SECTION in text, f"{DOC.relative_to(ROOT)} has no '{TABLE_SECTION}' section"
    section = re.split(r"^## ", text.split(TABLE_SECTION, 1)[1], maxsplit=1, flags=re.M)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        if not line.startswith("|") or re.match(r"^\|[\s:|-]+\|$", line):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0]):
            rows[name] = cells
    return rows


def test_every_variable_the_hub_reads_is_in_the_table():
    read, table = variables_read(), documented()
    missing = sorted(set(read) - set(table))
    assert not missing, (f"read from the environment but missing from {DOC.relative_to(ROOT)}'s table: "
                         + "; ".join(f"{name} ({', '.join(read[name])})" for name in missing))


def test_every_row_of_the_table_is_a_variable_the_hub_reads():
    read, table = variables_read(), documented()
    stale = sorted(set(table) - set(read))
    assert not stale, (f"{DOC.relative_to(ROOT)}'s table names variables the code no longer reads: "
                       f"{', '.join(stale)} (a setting that became a constant goes under 'Fixed limits')")


def test_every_read_names_its_variable():
    computed = [read.where for read in python_reads() if read.name is None]
    assert not computed, f"environment reads whose variable name is computed, so it can't be checked: {computed}"


def test_every_row_says_its_default_what_it_does_and_who_sets_it():
    header = [c.strip() for c in "Variable | Default | What it does | Who sets it".split("|")]
    text = DOC.read_text().split(TABLE_SECTION, 1)[1]
    headers = {tuple(c.strip() for c in line.strip().strip("|").split("|"))
               for line in text.splitlines() if line.startswith("| Variable")}
    assert headers == {tuple(header)}, headers
    incomplete = [name for name, cells in documented().items() if len(cells) != 4 or not all(cells)]
    assert not incomplete, f"rows without all four cells: {incomplete}"


def test_the_scan_finds_the_settings_modules_reads():
    """A guard on the scan itself: the settings module reads the environment, so the scan must see it."""
    found = variables_read()
    assert any("middleware_hub/settings.py" in where for wheres in found.values() for where in wheres), found
    assert any(where.startswith(SCRIPTS_DIR + "/") for wheres in found.values() for where in wheres), found

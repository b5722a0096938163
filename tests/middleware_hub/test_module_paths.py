"""Every module path the code's strings, comments and docstrings, and the docs, name exists: a message or a
page that points at a module which moved is found here, not by a reader who goes looking for it."""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Not the project's own text: installed or built files, data, and third-party bundles.
SKIPPED_PARTS = {".git", ".venv", "node_modules", "dist", "var", "__pycache__", "migrations", "results", "vendor",
                 "bundles", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
TEXT_SUFFIXES = {".md", ".js", ".ts", ".html", ".toml", ".ini", ".cfg", ".txt"}
TEXT_NAMES = {"Makefile", "run", "requirements-only"}

# A path with at least one folder, to a Python or JavaScript module: `plugins_app/runtime/wire.py`,
# `services/host/fetch.py`, `runtime/js/harness.js`. Not part of a URL or an absolute path.
SLASHED = re.compile(r"(?<![\w./\-~$@])(@?(?:[A-Za-z_][\w\-]*/)+[A-Za-z_][\w\-]*\.(?:py|js))\b")
# A dotted module name of the project: `plugins_app.services.scheduling.cron`, `services.scheduling.cron`,
# `runtime.engine.board`, `accounts.services.add_member`, `tests.spec_examples`.
DOTTED = re.compile(r"(?<![\w.\-/])((?:plugins_app|accounts|middleware_hub|hub_cli|tests|services|runtime)"
                    r"(?:\.[A-Za-z_]\w*)+)")
# The last part of a dotted match that is a file's suffix, not a module: `services.py`, `tests.md`.
FILE_SUFFIXES = {"py", "js", "ts", "md", "json", "html", "txt", "toml", "ini", "cfg", "sqlite3", "lock", "d"}
# Where a path that does not start at the repository's root may start, besides the folders of the
# file that names it: `services/...` and `api/...` under plugins_app, `engine/...` and `tables/...` under
# plugins_app/runtime, a static file (`hub_admin/editor.js`), an npm package the runtime bundles.
ROOTS = [ROOT, ROOT / "plugins_app", ROOT / "plugins_app" / "runtime", ROOT / "static",
         ROOT / "plugins_app" / "runtime" / "js" / "node_modules"]
# A build's output (`dist/plugin.js` in the example project's commands) is made, not kept.
BUILT = {"dist"}
# A Django system check's id (`plugins_app.E001`) is dotted like a module.
CHECK_ID = re.compile(r"[EW]\d{3}")
# Names that look like a module path and are something else, each with what it is.
NOT_MODULES = {
    "middleware_hub.execute": "the tracer's instrumentation scope, the name spans are exported under",
}
PACKAGES = ["plugins_app", "plugins_app.runtime"]


def project_files() -> list[Path]:
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_PARTS)
        for name in sorted(files):
            path = Path(folder) / name
            if path.suffix == ".py" or path.suffix in TEXT_SUFFIXES or name in TEXT_NAMES:
                found.append(path)
    return found


def prose(text: str, *, python: bool, data_strings: bool = True) -> list[tuple[int, str]]:
    """(line, text) of what may name a module: a Python file's strings and comments (with `data_strings`
    false, as in tests, whose strings are mostly data such as the files a test makes: its comments and
    docstrings), any other file whole."""
    if not python:
        return list(enumerate(text.splitlines(), 1))
    strings = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    statement_start = {None, tokenize.ENCODING, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    out, previous = [], None
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        docstring = token.type == tokenize.STRING and previous in statement_start
        if token.type == tokenize.COMMENT or (token.type in strings and (docstring or data_strings)):
            out += [(token.start[0] + i, line) for i, line in enumerate(token.string.splitlines())]
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token.type
    return out


def _ancestors(path: Path) -> list[Path]:
    return [p for p in path.parents if p == ROOT or ROOT in p.parents]


def slashed_exists(mention: str, where: Path) -> bool:
    return any((base / mention).is_file() for base in [*_ancestors(where), *ROOTS])


@cache
def _top_level_names(module_file: Path) -> frozenset[str]:
    names = set()
    for node in ast.parse(module_file.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def dotted_exists(name: str) -> bool:
    """A module, or a name defined at the top of one (`plugins_app.tasks.run_shadow`); a Django model
    label (`accounts.Account`) is its app's models."""
    parts = name.split(".")
    for length in range(len(parts), 0, -1):
        module = _module_file(parts[:length])
        if module is None:
            continue
        if length == len(parts):
            return True
        attribute = parts[length]
        if attribute in _top_level_names(module):
            return True
        models = _module_file([*parts[:length], "models"])
        return length == 1 and models is not None and attribute in _top_level_names(models)
    return False


def dotted_resolves(mention: str, where: Path) -> bool:
    """Absolute, or relative to a package the naming file is in, or to plugins_app / plugins_app.runtime."""
    here = where.relative_to(ROOT).with_suffix("").parts[:-1]
    bases = ["", *(".".join(here[:i]) for i in range(len(here), 0, -1)), *PACKAGES]
    return any(dotted_exists(f"{base}.{mention}" if base else mention) for base in bases)


def stale_in(where: Path, lines: list[tuple[int, str]]) -> list[str]:
    """"file:line: mention" for each module path in `lines` (of the file at `where`) that does not exist."""
    stale = []
    for number, line in lines:
        for mention in SLASHED.findall(line):
            if mention.split("/", 1)[0] not in BUILT and not slashed_exists(mention, where):
                stale.append(f"{where.relative_to(ROOT)}:{number}: {mention}")
        for mention in DOTTED.findall(line):
            last = mention.rsplit(".", 1)[1]
            if last in FILE_SUFFIXES or CHECK_ID.fullmatch(last) or mention in NOT_MODULES:
                continue
            if not dotted_resolves(mention, where):
                stale.append(f"{where.relative_to(ROOT)}:{number}: {mention}")
    return stale


IMPORT = re.compile(r"\s*(?:from|import)\s")


def _names_a_module_outside_imports(text: str) -> bool:
    """Tokenizing is the slow part: a file whose only dotted names are in its import lines is passed by."""
    return any(not IMPORT.match(line) and (SLASHED.search(line) or DOTTED.search(line)) for line in text.splitlines())


def stale_mentions(files: list[Path]) -> list[str]:
    stale = []
    for path in files:
        text = path.read_text(errors="replace")
        if not _names_a_module_outside_imports(text):
            continue
        in_tests = path.relative_to(ROOT).parts[0] == "tests"
        stale += stale_in(path, prose(text, python=path.suffix == ".py", data_strings=not in_tests))
    return stale


def test_every_module_path_named_in_the_code_and_the_docs_exists():
    stale = stale_mentions(project_files())
    assert stale == [], "module paths that do not exist:\n" + "\n".join(stale)


# The planted mentions are put together from parts, so this module's own text names no missing module.
GONE_MEMBERS = "runtime/" + "members.py"
GONE_CRON = "services." + "cron"
GONE_LATENCY = "plugins_app/services/" + "latency.py"


def test_a_stale_path_in_a_message_a_comment_or_a_docstring_is_found_at_its_line():
    source = (f'"""The module ({GONE_LATENCY})."""\n'
              f"# the fields {GONE_CRON} names; runtime/tables/members.py and services.scheduling.cron exist\n"
              f"def f():\n"
              f"    raise ValueError('not in plugins_app/{GONE_MEMBERS}, see plugins_app.tasks.run_shadow')\n")
    where = ROOT / "plugins_app" / "services" / "execution" / "planted.py"
    assert stale_in(where, prose(source, python=True)) == [
        f"plugins_app/services/execution/planted.py:1: {GONE_LATENCY}",
        f"plugins_app/services/execution/planted.py:2: {GONE_CRON}",
        f"plugins_app/services/execution/planted.py:4: plugins_app/{GONE_MEMBERS}",
    ]


def test_paths_relative_to_the_folders_of_the_hub_and_of_the_naming_file_resolve():
    page = ("`engine/process.py`, `tables/hooks.py`, `services/host/fetch.py`, `api/urls.py`, `hub_admin/editor.js`,\n"
            "`runtime/js/harness.js`, `services.engine.admission`, `accounts.Account`, `plugins_app.E001`\n"
            "`engine/" + "gone.py`, `services.engine." + "gone`\n")
    assert stale_in(ROOT / "docs" / "planted.md", prose(page, python=False)) == [
        "docs/planted.md:3: engine/" + "gone.py", "docs/planted.md:3: services.engine." + "gone"]


def test_a_tests_strings_are_data_but_its_docstrings_and_comments_are_checked():
    source = (f'"""Tests of {GONE_CRON}."""\n'
              f"FILES = ['pkg/{GONE_MEMBERS}']   # made in tmp_path by the test\n"
              f"# {GONE_LATENCY}\n")
    lines = prose(source, python=True, data_strings=False)
    assert stale_in(ROOT / "tests" / "planted.py", lines) == [f"tests/planted.py:1: {GONE_CRON}",
                                                             f"tests/planted.py:3: {GONE_LATENCY}"]

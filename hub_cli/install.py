"""`python -m hub_cli.install BIN_DIR`: write BIN_DIR/hub, a launcher of this checkout's CLI with this Python.

A launcher rather than `pip install -e .`: the hub is a Django project, not a package, and this needs
no build backend, no network and no package metadata, and survives the checkout being re-created."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LAUNCHER = """#!{python}
# Written by `make install` (python -m hub_cli.install); runs the `hub` command of {root}.
import sys
sys.path.insert(0, {root!r})
from hub_cli.main import main
main()
"""


def write_launcher(bin_dir: Path, python: str = sys.executable) -> Path:
    if not os.path.isabs(python):
        raise ValueError(f"the launcher's interpreter must be an absolute path, not {python!r}")
    path = bin_dir / "hub"
    path.write_text(LAUNCHER.format(python=python, root=str(ROOT)))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def interpreter(bin_dir: Path) -> str:
    """The absolute path of BIN_DIR's python (made absolute, not resolved: the venv's own path keeps the
    venv's packages, where the symlink's target is the bare system Python). A relative `#!.venv/bin/python`
    works only from the checkout, and a kernel reads a shebang relative to the caller's directory."""
    candidate = bin_dir / "python"
    return os.path.abspath(candidate if candidate.exists() else sys.executable)


if __name__ == "__main__":
    target = Path(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else Path(sys.executable).parent))
    print(write_launcher(target, interpreter(target)))

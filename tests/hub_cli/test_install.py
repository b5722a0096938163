"""`make install`'s launcher: .venv/bin/hub runs this checkout's CLI with the venv's Python."""

import os
import subprocess
import sys

import pytest

from hub_cli import __version__
from hub_cli.install import ROOT, write_launcher


def test_the_launcher_runs_the_cli_from_any_directory(tmp_path):
    launcher = write_launcher(tmp_path, sys.executable)
    done = subprocess.run([str(launcher), "--help"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "export" in done.stdout and "apply" in done.stdout and "tail" in done.stdout


def test_make_install_s_launcher_runs_from_any_directory_with_a_relative_bin_dir(tmp_path):
    """As the Makefile calls it (`python -m hub_cli.install .venv/bin`, a relative directory), built into a
    temp dir: the shebang is absolute, and `hub` found on PATH runs from an unrelated directory."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    # The venv's python, as a venv has it; a script, so the temp venv keeps this venv's packages.
    (bin_dir / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    (bin_dir / "python").chmod(0o755)
    subprocess.run([sys.executable, "-m", "hub_cli.install", "venv/bin"], cwd=tmp_path, check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
    launcher = bin_dir / "hub"
    assert launcher.read_text().splitlines()[0] == f"#!{bin_dir / 'python'}"
    elsewhere = tmp_path / "my-plugins"
    elsewhere.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(["hub", "--version"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, f"hub {__version__}"), done.stderr


def test_a_relative_interpreter_is_refused(tmp_path):
    with pytest.raises(ValueError, match="absolute"):
        write_launcher(tmp_path, ".venv/bin/python")


def test_the_makefile_installs_the_launcher():
    makefile = (ROOT / "Makefile").read_text()
    assert "install: venv js cli" in makefile and "-m hub_cli.install $(BIN)" in makefile


def test_a_usage_error_exits_1_because_2_means_changes(tmp_path):
    done = subprocess.run([sys.executable, "-m", "hub_cli", "plan", "--bogus"], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 1 and "No such option '--bogus'" in done.stderr

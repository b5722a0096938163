"""`make install`'s launcher: .venv/bin/hub runs this checkout's CLI with the venv's Python."""

import subprocess
import sys

from hub_cli.install import ROOT, write_launcher


def test_the_launcher_runs_the_cli_from_any_directory(tmp_path):
    launcher = write_launcher(tmp_path, sys.executable)
    done = subprocess.run([str(launcher), "--help"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "export" in done.stdout and "apply" in done.stdout and "tail" in done.stdout


def test_the_makefile_installs_the_launcher():
    makefile = (ROOT / "Makefile").read_text()
    assert "install: venv js cli" in makefile and "-m hub_cli.install $(BIN)" in makefile


def test_a_usage_error_exits_1_because_2_means_changes(tmp_path):
    done = subprocess.run([sys.executable, "-m", "hub_cli", "plan", "--bogus"], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 1 and "No such option '--bogus'" in done.stderr

"""A real hub (gunicorn, two workers, its own SQLite) for the CLI's tests, and a way to run `hub` on it."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.plugins_app.serving import ROOT, Served

_accounts = itertools.count(1)


@dataclass
class Hub:
    served: Served

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.served.port}"

    def new_key(self, name: str = "") -> str:
        """The raw key of a new, empty account."""
        return self.served.manage("create_api_key", name or f"account-{next(_accounts)}").strip().splitlines()[-1]

    def api(self, key: str, method: str, path: str, body=None) -> tuple[int, dict]:
        status, _, raw = self.served.request(method, f"/api/v1/{path}", body,
                                             {"Authorization": f"Bearer {key}"})
        return status, (json.loads(raw) if raw else {})

    def ok(self, key: str, method: str, path: str, body=None) -> dict:
        status, answer = self.api(key, method, path, body)
        assert status < 300, (status, answer)
        return answer

    def changes(self, key: str) -> list[dict]:
        return self.ok(key, "GET", "changes?pageSize=500")["results"]


@pytest.fixture(scope="session")
def hub():
    served = Served(workers=2)
    served.env["HUB_TAIL_DIR"] = str(served.workdir / "tail")   # this hub's ring, not the checkout's var/
    try:
        served.start()
        served.manage("sync_catalog")
        yield Hub(served)
    finally:
        served.stop()


@pytest.fixture
def cli(hub, tmp_path):
    """Runs `python -m hub_cli ARGS` against the test hub with `key`; returns the completed process."""
    config_home = tmp_path / "config"   # no profile of the user's is read

    def run(key: str, *args: str, check_status: int | None = 0, timeout: float = 120,
            **env: str) -> subprocess.CompletedProcess:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
        environment.update({"HUB_URL": hub.url, "HUB_KEY": key, "XDG_CONFIG_HOME": str(config_home), **env})
        done = subprocess.run([sys.executable, "-m", "hub_cli", *args], cwd=ROOT, env=environment,
                              capture_output=True, text=True, timeout=timeout)
        if check_status is not None:
            assert done.returncode == check_status, (done.returncode, done.stdout, done.stderr)
        return done
    return run


def tree(directory: Path) -> dict[str, bytes]:
    """Every file under `directory`, by relative path, with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}

"""Example plugins: the project's own (tests/example_plugins/, always run) and the spec's, read unchanged
from ../shared/spec/examples when that folder is beside the checkout (as in CI)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OWN_FOLDER = ROOT / "tests" / "example_plugins"
SPEC_FOLDER = ROOT.parent / "shared" / "spec" / "examples"
# .ci/run sets it: the spec is checked out beside the repository there, so a missing folder is a failure.
REQUIRE_SPEC = "HUB_TEST_SPEC"
SKIP_REASON = (f"the spec's example plugins are not at {SPEC_FOLDER}: put the hooks spec's examples/ folder "
               f"there (../shared/spec/examples beside this checkout) to run these tests on them too")


@dataclass(frozen=True)
class Examples:
    """A folder of example plugins, one `<name>-<hook>.ts` file each (cron-sentinel.ts hooks two)."""

    folder: Path

    def names(self) -> list[str]:
        return sorted(p.name for p in self.folder.glob("*.ts"))

    def path(self, name: str) -> Path:
        return self.folder / name

    def read(self, name: str) -> str:
        return self.path(name).read_text()


OWN = Examples(OWN_FOLDER)
SPEC = Examples(SPEC_FOLDER)


@pytest.fixture(params=[pytest.param(OWN, id="own"), pytest.param(SPEC, id="spec", marks=pytest.mark.spec)])
def examples(request) -> Examples:
    """Each test that takes it runs on the project's copies and, when the folder is there, on the spec's."""
    if request.param is SPEC and not SPEC_FOLDER.is_dir():
        pytest.fail(f"{REQUIRE_SPEC} is set but {SPEC_FOLDER} is missing")
    return request.param


def pytest_collection_modifyitems(config, items):
    if SPEC_FOLDER.is_dir() or os.environ.get(REQUIRE_SPEC):
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if "spec" in item.keywords:
            item.add_marker(skip)

"""What each silent-engine scenario cost, printed at the end of the run (conftest.py): figures, not
assertions, so a busy machine makes them larger without failing a test."""

from __future__ import annotations

FIGURES: list[dict] = []


def record(scenario: str, **values) -> dict:
    row = {"scenario": scenario, **values}
    FIGURES.append(row)
    print(row)   # also in the test's captured output when it fails
    return row

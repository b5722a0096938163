"""The spec's example plugins, read unchanged from ../shared/spec/examples beside the checkout."""

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "spec" / "examples"


def example(name: str) -> str:
    return (EXAMPLES / name).read_text()

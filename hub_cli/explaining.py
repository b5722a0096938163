"""`hub explain`: the hub's answer for a hook's chain, one line per installation as a person reads it."""

from __future__ import annotations

from typing import Any


def render(answer: dict[str, Any]) -> str:
    chain = answer.get("chain") or []
    if not chain:
        return f"{answer.get('hook')}: no installation hooks this point"
    lines = [f"{answer.get('hook')}: {answer.get('runs')} of {len(chain)} would run"]
    for step in chain:
        verdict = "runs" if step["runs"] else f"skipped ({step['reason']})"
        lines.append(f"  {step['position'] + 1}. {step['plugin']} [{step['installationId']}]: {verdict}")
        if step.get("detail"):
            lines.append(f"       {step['detail']}")
        if step.get("matcher") and step.get("reason") != "match":
            lines.append(f"       {step['matcher']}")
    return "\n".join(lines)

"""A stored matcher said in words ("command matches `\\brm`"), for the admin, the CLI and explain."""

from __future__ import annotations

import json
from typing import Any

VERBS = {"equals": "is", "in": "is one of", "includes": "includes", "startsWith": "starts with",
         "regex": "matches"}


def shown(value: Any) -> str:
    """A value as the words show it (JSON, cut short)."""
    if value is None:
        return "null"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def matcher(m: dict[str, Any]) -> str:
    parts = []
    for key, value in m.items():
        if key == "all":
            parts.append("(" + " and ".join(matcher(sub) for sub in value) + ")")
        elif key == "any":
            parts.append("(" + " or ".join(matcher(sub) for sub in value) + ")")
        elif key == "not":
            parts.append("not (" + matcher(value) + ")")
        else:
            parts.append(condition(key, value))
    return " and ".join(parts)


def condition(name: str, c: dict[str, Any]) -> str:
    parts = []
    for op, operand in c.items():
        if op == "ignoreCase":
            continue
        if op in ("any", "all"):
            joiner = " or " if op == "any" else " and "
            parts.append("(" + joiner.join(condition(name, sub) for sub in operand) + ")")
        elif op == "not":
            parts.append("not (" + condition(name, operand) + ")")
        else:
            parts.append(f"{name} {VERBS[op]} {_operand(op, operand)}")
    text = " and ".join(parts)
    return text + " (ignoring case)" if c.get("ignoreCase") else text


def _operand(op: str, operand: Any) -> str:
    if op == "regex":
        return f"`{operand}`"
    if isinstance(operand, list):
        shown_values = [shown(v) for v in operand]
        return ", ".join(shown_values) if op == "in" else " or ".join(shown_values)
    return shown(operand)


def lines(hook_names: list[str], matchers: dict[str, dict[str, Any]]) -> list[str]:
    """One line per hook a plugin handles: "hook: runs when ..." or "hook: runs on every call"."""
    return [f"{hook}: " + ("runs when " + matcher(matchers[hook]) if matchers.get(hook) else "runs on every call")
            for hook in hook_names]


def hooks(matchers: dict[str, dict[str, Any]]) -> dict[str, str]:
    """{hook: "runs when ..."} for each hook a plugin narrows."""
    return {hook: "runs when " + matcher(m) for hook, m in matchers.items()}

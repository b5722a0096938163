"""Comparing a candidate version with the live one at the same place of a chain, on the same input.

Shadow runs and checks both answer this comparison (as GitHub's Scientist runs a candidate beside the
control): for one call, what the live version made of the input it was given, what the candidate made
of that very input, and which of five kinds the difference is. Plain data in and out; no database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from plugins_app.runtime.protocol import FAILED_STATUSES
from plugins_app.runtime.tables.hooks import HookSpec
from plugins_app.runtime.web.chain import NOT_RUN, ChainResult, HandlerTrace

KINDS = ("same", "different", "wouldCancel", "wouldNoLongerCancel", "failed")
EXAMPLES_KEPT = 20   # the newest examples of each kind a report shows


@dataclass(frozen=True)
class Side:
    """What one version did at its place: `status` changed | unchanged | cancelled | failed | skipped,
    the value it passed on (the input itself when it cancelled, failed or was skipped), and the cancel
    reason or failure message."""

    status: str
    value: Any
    reason: str | None = None

    @property
    def passes_on(self) -> Any:
        return self.value

    def as_dict(self) -> dict:
        return {"status": self.status, "value": self.value, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict) -> Side:
        return cls(str(data.get("status")), data.get("value"), data.get("reason"))


def side_of(trace: HandlerTrace, before: Any, after: Any, cancel_reason: str | None) -> Side | None:
    """One handler's Side from its trace entry, given the value it received and the one it returned."""
    if trace.status == "quarantined":
        return Side("skipped", before)
    if trace.status == "cancelled":
        return Side("cancelled", before, cancel_reason or "")
    if trace.status in FAILED_STATUSES:
        return Side("failed", before, trace.warning or trace.status)
    return Side("changed" if after != before else "unchanged", after)


def candidate_side(spec: HookSpec, before: Any, result: ChainResult) -> Side | None:
    """The Side of a run of the candidate alone (its chain is that one handler); None when it did not run."""
    if not result.trace or result.trace[0].status in NOT_RUN:   # quarantined, or its matcher left it out
        return None
    reason = result.cancellation.reason if result.cancellation else None
    return side_of(result.trace[0], before, result.value, reason)


def kind_of(live: Side, candidate: Side) -> str:
    """Which of KINDS the candidate's difference from the live version is."""
    if candidate.status == "failed":
        return "failed"
    if candidate.status == "cancelled":
        return "same" if live.status == "cancelled" else "wouldCancel"
    if live.status == "cancelled":
        return "wouldNoLongerCancel"
    return "same" if candidate.value == live.passes_on else "different"


@dataclass(frozen=True)
class Step:
    """One live handler's place in a run with traced values: the value it received and what it did."""

    installation_id: str
    input: Any
    live: Side

    def as_dict(self) -> dict:
        return {"id": self.installation_id, "input": self.input, "live": self.live.as_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> Step:
        return cls(str(data["id"]), data.get("input"), Side.from_dict(data.get("live") or {}))


def steps_of(spec: HookSpec, context: dict, result: ChainResult) -> list[Step]:
    """Each handler that ran (or was skipped) in a run whose trace carries values, with its input: the
    value the handlers before it passed on."""
    current = spec.value_of(context)
    steps = []
    for t in result.trace:
        reason = (result.cancellation.reason if result.cancellation is not None
                  and result.cancellation.installation_id == t.installation_id else None)
        side = side_of(t, current, t.value, reason)
        assert side is not None
        steps.append(Step(t.installation_id, current, side))
        current = side.passes_on
    return steps


def at_place(spec: HookSpec, context: dict, steps: list[Step], installation_id: str | None,
             before_ids: Iterable[str] | None = None) -> tuple[Any, Side] | None:
    """The input and the live Side at a place of the chain: without `before_ids`, the place where
    `installation_id` ran live (a shadowed draft); with them, the place right after those live handlers
    (an installation in shadow mode, which the live value passes unchanged). None when the live chain
    never got there (it was cancelled before)."""
    if before_ids is None:
        return next(((s.input, s.live) for s in steps if s.installation_id == installation_id), None)
    wanted = set(before_ids)
    current = spec.value_of(context)
    for step in steps:
        if step.installation_id not in wanted:
            continue
        if step.live.status == "cancelled":
            return None
        current = step.live.passes_on
    return current, Side("unchanged", current)


@dataclass
class Tally:
    """Counts of each kind and the newest EXAMPLES_KEPT examples of each (added oldest first)."""

    calls: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    examples: dict[str, list[dict]] = field(default_factory=lambda: {k: [] for k in KINDS})

    def add(self, kind: str, example: dict) -> None:
        self.calls += 1
        self.counts[kind] += 1
        kept = self.examples[kind]
        kept.insert(0, example)
        del kept[EXAMPLES_KEPT:]

    def different_share(self) -> float:
        """The percentage of calls whose result was not the same (different, cancels, failures)."""
        return 0.0 if not self.calls else 100.0 * (self.calls - self.counts["same"]) / self.calls

    def as_dict(self) -> dict:
        return {"calls": self.calls, "counts": dict(self.counts), "examples": self.examples,
                "differentPercent": round(self.different_share(), 2)}


def example(input_value: Any, live: Side, candidate: Side, **about: Any) -> dict:
    """One comparison side by side, as reports show it (redact it before it is stored or answered)."""
    return {**about, "input": input_value, "live": live.as_dict(), "candidate": candidate.as_dict()}


def summary(tally: Tally) -> str:
    """"200 recorded calls: 196 same, 3 different, 1 would now cancel" for a page or a terminal."""
    words = {"same": "same", "different": "different", "wouldCancel": "would now cancel",
             "wouldNoLongerCancel": "would no longer cancel", "failed": "failed"}
    parts = [f"{tally.counts[k]} {words[k]}" for k in KINDS if tally.counts[k] or k == "same"]
    return f"{tally.calls} recorded call{'s' if tally.calls != 1 else ''}: " + ", ".join(parts)


def with_value(spec: HookSpec, context: dict, value: Any) -> dict:
    """`context` with the hook's mutable value(s) set to `value` (what a place of the chain receives)."""
    if spec.observe_only:
        return dict(context)
    if spec.single_field:
        return {**context, spec.single_field: value}
    return {**context, **(value if isinstance(value, dict) else {})}

"""Pipelined evaluations on a MiniRacer isolate, waited for without the asyncio round trip.

mini-racer's `eval_cancelable` costs an asyncio future, a callback registration and an event-loop
wake-up per evaluation; on the hot path (start a chain, then read its settled result) that is
most of the engine's own time. Here evaluations are posted straight to the isolate's thread and
their results read, in posting order, from the queue mini-racer keeps for uncancelable tasks.
This leans on mini-racer internals (`Context._dll`, `_non_cancelable_mr_task_results_queue`), so
requirements.txt pins mini-racer and tests/runtime covers every path through here.
"""

from __future__ import annotations

import asyncio
import queue
from collections import deque

from py_mini_racer import MiniRacer

CANCEL_GRACE_SECONDS = 0.5   # how long a cancelled evaluation may take to report back
# A callback id mini-racer has no registration for: it drops the value on the event loop.
_UNANSWERED = 2 ** 62


class IsolateStuck(Exception):
    """The isolate's thread did not come back from a cancelled evaluation: it cannot be reused."""


class EvalQueue:
    """Evaluations posted in order; `take` answers the oldest answered one still outstanding.

    An evaluation posted with `answered=False` sends its value nowhere: the caller learns what it
    did from a later evaluation, and the isolate's thread wakes this one once, not twice."""

    def __init__(self, mr: MiniRacer):
        self._ctx = mr._ctx
        self._results: queue.Queue = self._ctx._non_cancelable_mr_task_results_queue
        self._outstanding: deque = deque()   # (task id, code handle kept alive until answered)
        self._unanswered: list = []          # the same, for evaluations whose value is dropped

    def post(self, code: str, answered: bool = True) -> None:
        handle = self._ctx._python_to_value_handle(code)
        task_id = self._ctx._dll.mr_eval(self._ctx._ctx, handle.raw, 0 if answered else _UNANSWERED)
        (self._outstanding if answered else self._unanswered).append((task_id, handle))

    def take(self, timeout: float):
        """The oldest outstanding evaluation's value. JS errors raise as mini-racer raises them;
        past `timeout` every outstanding evaluation is cancelled and asyncio.TimeoutError raised."""
        try:
            raw = self._results.get(timeout=timeout)
        except queue.Empty:
            self._cancel_all()
            raise asyncio.TimeoutError from None
        self._outstanding.popleft()
        if not self._outstanding:
            self._unanswered.clear()   # the isolate runs tasks in order: those before are done too
        return self._ctx._value_handle_to_python(raw)

    def _cancel_all(self) -> None:
        for task_id, _ in self._unanswered + list(self._outstanding):
            self._ctx._dll.mr_cancel_task(self._ctx._ctx, task_id)   # a no-op for finished tasks
        self._unanswered.clear()
        while self._outstanding:
            try:
                self._results.get(timeout=CANCEL_GRACE_SECONDS)
            except queue.Empty:
                raise IsolateStuck() from None
            self._outstanding.popleft()

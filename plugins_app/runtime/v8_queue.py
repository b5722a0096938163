"""Pipelined evaluations on a MiniRacer isolate, their results read in posting order.

mini-racer's `eval_cancelable` costs an asyncio future and a callback registration per
evaluation; on the hot path (start a chain, then read its settled result) that is most of the
engine's own time. Here evaluations are posted straight to the isolate's thread under callback ids
of our own, and their results land, in posting order, in a queue that can also hand a result over
on the isolate's own thread (`post(..., early=Early(...))`): the engine then answers the web
process before its own main thread wakes. This leans on mini-racer internals (`Context._dll`,
`handle_callback_from_v8`), so requirements.txt pins mini-racer and tests/runtime/test_v8_queue.py
covers each path through here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import select
import time
from collections import deque
from typing import Callable

from py_mini_racer import MiniRacer

CANCEL_GRACE_SECONDS = 0.5   # how long a cancelled evaluation may take to report back
# Callback ids mini-racer never hands out (it counts up from 1): ours, routed before it sees them.
_UNANSWERED = 2 ** 62
_ANSWERED = 2 ** 62 + 1
_UNCONVERTED = object()


class IsolateStuck(Exception):
    """The isolate's thread did not come back from a cancelled evaluation: it cannot be reused."""


class Early:
    """How a result may be answered on the isolate's thread: `answer_for(value)` gives the bytes
    to send (or None to leave the value to the waiting thread), `send` sends them, and `fd` is
    where the reply to that answer will arrive (what wakes the waiting thread instead)."""

    def __init__(self, answer_for: Callable[[object], bytes | None], send: Callable[[bytes], None], fd: int):
        self.answer_for, self.send, self.fd = answer_for, send, fd


class _Results:
    """The results of posted evaluations (put() runs on the isolate's thread). A pipe byte wakes
    the waiting thread, also after `early` has answered a value on the isolate's thread."""

    def __init__(self, ctx):
        self._ctx = ctx
        self.items: deque = deque()   # [value handle, converted value or _UNCONVERTED, answered early]
        self.early: Early | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._poller = select.poll()
        self._poller.register(self._wake_r, select.POLLIN)

    def put(self, handle) -> None:   # the isolate's thread
        item = [handle, _UNCONVERTED, False]   # the handle is kept: handles are freed off this thread
        early = self.early
        if early is not None:
            try:
                item[1] = self._ctx._value_handle_to_python(handle)
            except Exception:   # noqa: BLE001 - JS errors are raised to the waiting thread instead
                pass
            answer = None if item[1] is _UNCONVERTED else early.answer_for(item[1])
            if answer is not None:
                item[2] = True
                self.items.append(item)   # queued before it is sent: once the parent has it, it is here
                try:
                    early.send(answer)
                except OSError:
                    item[2] = False   # the waiting thread answers (or finds the parent gone)
                # The waiting thread still wakes, after the answer is out: it keeps the books.
                os.write(self._wake_w, b".")
                return
        self.items.append(item)
        os.write(self._wake_w, b".")

    def next(self, timeout: float | None, also_fd: int | None = None):
        """The oldest item; raises queue.Empty after `timeout`. Input on `also_fd` (the parent's
        socket) means a value taken early has been answered, so the item is surely there."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if also_fd is not None:
            self._poller.register(also_fd, select.POLLIN)
        try:
            while not self.items:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
                events = self._poller.poll(remaining)
                if not events and not self.items:
                    raise queue.Empty
                for fd, _ in events:
                    if fd == self._wake_r:
                        self._drain()
                    elif fd == also_fd and not self.items:
                        self._poller.unregister(also_fd)   # the parent hung up or wrote early
                        also_fd = None
            return self.items.popleft()
        finally:
            if also_fd is not None:
                self._poller.unregister(also_fd)

    async def wait_async(self, timeout: float) -> bool:
        """True once an item is there; False after `timeout`. The event loop sleeps meanwhile, so
        the engine keeps serving its other connections."""
        if self.items:
            return True
        loop = asyncio.get_running_loop()
        woken = loop.create_future()
        loop.add_reader(self._wake_r, lambda: woken.done() or woken.set_result(None))
        try:
            if self.items:
                return True
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await woken
            return bool(self.items)
        finally:
            loop.remove_reader(self._wake_r)
            self._drain()

    def close(self) -> None:
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _drain(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass


class EvalQueue:
    """Evaluations posted in order; `take` answers the oldest answered one still outstanding.

    An evaluation posted with `answered=False` sends its value nowhere: the caller learns what it
    did from a later evaluation, and the isolate's thread wakes this one once, not twice."""

    def __init__(self, mr: MiniRacer):
        self._ctx = mr._ctx
        self._results = _Results(self._ctx)
        # Results of evaluations posted here arrive under callback ids of their own, so they never
        # mix with the uncancelable calls mini-racer makes itself (resolving a host call's promise
        # is one, and may happen while a poll posted here is outstanding).
        mini_racers_own = self._ctx.handle_callback_from_v8
        results = self._results

        def route(callback_id: int, raw_handle) -> None:   # the isolate's thread
            if callback_id == _ANSWERED:
                results.put(self._ctx._wrap_raw_handle(raw_handle))
            elif callback_id == _UNANSWERED:
                self._ctx._wrap_raw_handle(raw_handle)   # wrapped only to be freed
            else:
                mini_racers_own(callback_id, raw_handle)

        object.__setattr__(self._ctx, "handle_callback_from_v8", route)
        self._outstanding: deque = deque()   # (task id, code handle kept alive until answered)
        self._unanswered: list = []          # the same, for evaluations whose value is dropped

    def post(self, code: str, answered: bool = True, early: Early | None = None) -> None:
        """Queue `code` on the isolate's thread. With `early`, its value is offered to `early` on
        that thread as soon as it exists (see take)."""
        if early is not None:
            self._results.early = early
        handle = self._ctx._python_to_value_handle(code)
        task_id = self._ctx._dll.mr_eval(self._ctx._ctx, handle.raw, _ANSWERED if answered else _UNANSWERED)
        (self._outstanding if answered else self._unanswered).append((task_id, handle))

    def take(self, timeout: float) -> tuple[object, bool]:
        """The oldest outstanding evaluation's value, and whether an `early` given to post()
        already answered it on the isolate's thread (this thread then sleeps on until `early.fd`
        has input, or the timeout). JS errors raise as mini-racer raises them; past `timeout`
        every outstanding evaluation is cancelled and asyncio.TimeoutError raised."""
        early = self._results.early
        try:
            handle, value, taken_early = self._results.next(timeout, early.fd if early else None)
        except queue.Empty:
            self._results.early = None
            self._cancel_all()
            raise asyncio.TimeoutError from None
        finally:
            self._results.early = None
        self._outstanding.popleft()
        if not self._outstanding:
            self._unanswered.clear()   # the isolate runs tasks in order: those before are done too
        if value is _UNCONVERTED:
            value = self._ctx._value_handle_to_python(handle)
        return value, taken_early

    async def wait(self, timeout: float) -> bool:
        """True once the oldest outstanding evaluation has answered (take_ready() then has it)."""
        return await self._results.wait_async(timeout)

    def take_ready(self) -> tuple[object, bool]:
        """The oldest outstanding evaluation's value once wait() said it is there."""
        self._results.early = None
        handle, value, taken_early = self._results.next(0)
        self._outstanding.popleft()
        if not self._outstanding:
            self._unanswered.clear()
        if value is _UNCONVERTED:
            value = self._ctx._value_handle_to_python(handle)
        return value, taken_early

    def close(self) -> None:
        self._results.close()

    def _cancel_all(self) -> None:
        for task_id, _ in self._unanswered + list(self._outstanding):
            self._ctx._dll.mr_cancel_task(self._ctx._ctx, task_id)   # a no-op for finished tasks
        self._unanswered.clear()
        while self._outstanding:
            try:
                self._results.next(CANCEL_GRACE_SECONDS)
            except queue.Empty:
                raise IsolateStuck() from None
            self._outstanding.popleft()

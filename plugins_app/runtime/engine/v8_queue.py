"""Pipelined evaluations on a MiniRacer isolate, their results read in posting order.

mini-racer's `eval_cancelable` costs an asyncio future and a callback registration per
evaluation; on the hot path (start a chain, then read its settled result) that is most of the
engine's own time. Here evaluations are posted straight to the isolate's thread under callback ids
of our own, and their results land, in posting order, in a queue that can also hand a result over
on the isolate's own thread (`post(..., early=Early(...))`): the engine then answers the web
process before its own main thread wakes. This leans on mini-racer internals (`Context._dll`,
`handle_callback_from_v8`), so requirements.txt pins mini-racer and tests/runtime/test_v8_queue.py
covers each path through here.

The isolate's thread is V8's, not Python's: left alone, CPython makes it a thread state for each
callback and destroys it afterwards, mapping and unmapping a 16 KiB frame stack each time, and
every unmap interrupts each CPU the engine runs on to flush its TLB (a VM exit apiece on a virtual
machine). That was two of each per chain, a tenth of the engine's CPU under gunicorn. The queue
keeps one thread state for the isolate's thread from its first callback on, and frees it once
the thread has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from py_mini_racer import JSFunction, MiniRacer, PythonJSConvertedTypes
from py_mini_racer._context import Context
from py_mini_racer._value_handle import RawValueHandleType, ValueHandle

# A posted evaluation's handles: its code's, or a call's function and receiver.
_Handles = ValueHandle | tuple[ValueHandle, ValueHandle]

# Callback ids mini-racer never hands out (it counts up from 1): ours, routed before it sees them.
_UNANSWERED = 2 ** 62
_ANSWERED = 2 ** 62 + 1
_UNCONVERTED = object()

# CPython's C API, through function pointers of our own (ctypes.pythonapi's are shared).
_gilstate_ensure = ctypes.PYFUNCTYPE(ctypes.c_int)(("PyGILState_Ensure", ctypes.pythonapi))
_thread_state_get = ctypes.PYFUNCTYPE(ctypes.c_void_p)(("PyThreadState_Get", ctypes.pythonapi))
_thread_state_clear = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(("PyThreadState_Clear", ctypes.pythonapi))
_thread_state_delete = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(("PyThreadState_Delete", ctypes.pythonapi))


class _KeptThreadState:
    """The isolate thread's Python thread state, kept between callbacks (see the module's note), and
    the V8 isolate that thread runs (read there once: V8 answers it only on the isolate's thread)."""

    def __init__(self, dll: ctypes.CDLL) -> None:
        self.pointer: int | None = None
        self.thread_id: int | None = None
        self.isolate: int | None = None
        self._dll = dll

    def keep(self) -> None:   # the isolate's thread, inside a callback
        _gilstate_ensure()   # never released: the state outlives this callback
        self.pointer = _thread_state_get()
        self.thread_id = threading.get_native_id()
        self.isolate = _v8_call(self._dll, "_ZN2v87Isolate10GetCurrentEv", ctypes.c_void_p)()

    def free(self) -> None:
        """Frees the state once its thread has ended (a live thread's is never touched)."""
        if self.pointer is None or os.path.exists(f"/proc/self/task/{self.thread_id}"):
            return
        pointer, self.pointer = self.pointer, None
        _thread_state_clear(pointer)
        _thread_state_delete(pointer)


def _v8_call(dll: ctypes.CDLL, symbol: str, restype: Any, *argtypes: Any) -> Any:
    """One of V8's own functions, which libmini_racer exports (mini-racer wraps only some)."""
    function = getattr(dll, symbol)
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


class Early:
    """How a result may be answered on the isolate's thread: `answer_for(value)` gives the bytes
    to send (or None to leave the value to the waiting thread), and `send` sends them; `turn`, when
    set, is given each value not answered so (on that thread too, before the loop is woken)."""

    def __init__(self, answer_for: Callable[[object], bytes | None], send: Callable[[bytes], None]):
        self.answer_for, self.send = answer_for, send
        self.turn: Callable[[object], None] | None = None


class _Results:
    """The results of posted evaluations (put() runs on the isolate's thread). A pipe byte wakes
    the event loop, also after `early` has answered a value on the isolate's thread."""

    def __init__(self, ctx: Context):
        self._ctx = ctx
        # [value handle, converted value or _UNCONVERTED, answered early, the isolate thread's CPU
        # seconds when the value arrived (the chains it ran are charged it)]
        self.items: deque[list[Any]] = deque()
        self.earlies: deque[Early | None] = deque()   # each answered evaluation's, in posting order
        self.on_items: Callable[[], None] | None = None  # called whenever the loop wakes here (its reader)
        self.answered_early = 0   # values answered on the isolate's thread
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._loop = asyncio.get_running_loop()
        self._ready = asyncio.Event()
        self._loop.add_reader(self._wake_r, self._woken)   # once: not an epoll change per wait

    def put(self, handle: ValueHandle) -> None:   # the isolate's thread
        # The handle is kept: handles are freed off this thread.
        item: list[Any] = [handle, _UNCONVERTED, False, time.thread_time()]
        queued = False
        early = self.earlies.popleft() if self.earlies else None
        if early is not None:
            try:
                item[1] = self._ctx._value_handle_to_python(handle)
            except Exception:   # noqa: BLE001 - JS errors are raised to the waiting thread instead
                pass
            answer = None if item[1] is _UNCONVERTED else early.answer_for(item[1])
            if answer is not None:
                item[2] = queued = True
                self.items.append(item)   # queued before it is sent: once the parent has it, it is here
                self.answered_early += 1  # ...and counted (a status asked after the answer shows it)
                try:
                    early.send(answer)
                except OSError:
                    item[2] = False   # the waiting thread answers (or finds the parent gone)
            elif item[1] is not _UNCONVERTED and early.turn is not None:
                try:
                    early.turn(item[1])
                except Exception:   # noqa: BLE001 - never on this thread: the loop reads the value as before
                    pass
        if not queued:
            self.items.append(item)
        os.write(self._wake_w, b".")   # every value wakes the loop: its reader charges the turn's CPU

    def _woken(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass
        self._ready.set()
        if self.on_items is not None:
            self.on_items()

    async def wait(self, timeout: float) -> bool:
        """True once an item is there; False after `timeout`. The event loop serves the engine's
        other connections meanwhile."""
        if self.items:
            return True
        self._ready.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while not self.items:
                    await self._ready.wait()
                    self._ready.clear()
        return bool(self.items)

    def close(self) -> None:
        self._loop.remove_reader(self._wake_r)
        os.close(self._wake_r)
        os.close(self._wake_w)


class EvalQueue:
    """Evaluations posted in order; `take_ready` answers the oldest answered one still outstanding.

    An evaluation posted with `answered=False` sends its value nowhere: the caller learns what it
    did from a later evaluation, and the isolate's thread wakes this one once, not twice."""

    def __init__(self, mr: MiniRacer):
        ctx = mr._ctx
        assert ctx is not None, "a MiniRacer that is not closed has its context"
        self._ctx = ctx
        self._results = _Results(self._ctx)
        # Results of evaluations posted here arrive under callback ids of their own, so they never
        # mix with the uncancelable calls mini-racer makes itself (resolving a host call's promise
        # is one, and may happen while a poll posted here is outstanding).
        mini_racers_own = self._ctx.handle_callback_from_v8
        results = self._results
        kept = self._thread_state = _KeptThreadState(ctx._dll)
        self._terminate = _v8_call(ctx._dll, "_ZN2v87Isolate18TerminateExecutionEv", None, ctypes.c_void_p)
        self._cancel_termination = _v8_call(ctx._dll, "_ZN2v87Isolate24CancelTerminateExecutionEv", None,
                                            ctypes.c_void_p)
        self.cpu_mark = 0.0   # the isolate thread's CPU seconds when the value take_ready() gave last arrived

        def route(callback_id: int, raw_handle: RawValueHandleType) -> None:   # the isolate's thread
            if kept.pointer is None:
                kept.keep()
            if callback_id == _ANSWERED:
                results.put(ctx._wrap_raw_handle(raw_handle))
            elif callback_id == _UNANSWERED:
                ctx._wrap_raw_handle(raw_handle)   # wrapped only to be freed
            else:
                mini_racers_own(callback_id, raw_handle)

        object.__setattr__(self._ctx, "handle_callback_from_v8", route)
        # Handles of posted code, kept alive until it has run: each answered evaluation's, with
        # those of the unanswered ones posted before it (the isolate's thread runs them in order).
        self._outstanding: deque[tuple[_Handles, list[_Handles]]] = deque()
        self._unanswered: list[_Handles] = []   # unanswered ones posted since the last answered one
        self._no_arguments: ValueHandle | None = None   # post_call's argument list: an empty JS array

    def post(self, code: str, answered: bool = True, early: Early | None = None) -> None:
        """Queue `code` on the isolate's thread. With `early`, its value is offered to `early` on
        that thread as soon as it exists; take_ready() then says it was answered."""
        handle = self._ctx._python_to_value_handle(code)
        self._keep(handle, answered, early)
        self._ctx._dll.mr_eval(self._ctx._ctx, handle.raw, _ANSWERED if answered else _UNANSWERED)

    def prepare_calls(self, empty_array: PythonJSConvertedTypes) -> None:
        """Give post_call its (empty) argument list: a JS array no plugin can reach."""
        self._no_arguments = self._ctx._python_to_value_handle(empty_array)

    def post_call(self, function: JSFunction, this: str = "", answered: bool = True,
                  early: Early | None = None) -> None:
        """Queue a call of the JS `function` (a JSFunction) with the string `this` as its receiver
        and no arguments: unlike post(), nothing is compiled, however `this` varies from call to call."""
        if self._no_arguments is None:
            raise RuntimeError("prepare_calls() first")
        function_handle = self._ctx._python_to_value_handle(function)
        this_handle = self._ctx._python_to_value_handle(this)
        self._keep((function_handle, this_handle), answered, early)
        self._ctx._dll.mr_call_function(self._ctx._ctx, function_handle.raw, this_handle.raw, self._no_arguments.raw,
                                        _ANSWERED if answered else _UNANSWERED)

    def _keep(self, handles: _Handles, answered: bool, early: Early | None) -> None:
        """Before the post: its value may be back before the post returns."""
        if answered:
            self._outstanding.append((handles, self._unanswered))
            self._unanswered = []
            self._results.earlies.append(early)
        else:
            self._unanswered.append(handles)

    def answered_early(self) -> bool:
        """Whether the oldest outstanding evaluation's value went out on the isolate's thread. Known
        before it is sent: whoever it went to may be back before the event loop has woken."""
        items = self._results.items
        return bool(items) and bool(items[0][2])

    def answered_early_count(self) -> int:
        """Values answered on the isolate's thread so far."""
        return self._results.answered_early

    def read_with(self, reader: Callable[[], None] | None) -> None:
        """Have the event loop call `reader` right when values arrive (in the wake's own callback, so
        whoever awaits a value it hands on resumes in the loop's next turn, not the one after)."""
        self._results.on_items = reader

    def ready(self) -> bool:
        """Whether the oldest outstanding evaluation has answered."""
        return bool(self._results.items)

    async def wait(self, timeout: float) -> bool:
        """True once the oldest outstanding evaluation has answered (take_ready() then has it)."""
        return await self._results.wait(timeout)

    @property
    def thread_id(self) -> int | None:
        """The native id of the isolate's thread (None until it has called back once)."""
        return self._thread_state.thread_id

    def take_ready(self) -> tuple[object, bool]:
        """The oldest outstanding evaluation's value once wait() said it is there."""
        handle, value, taken_early, self.cpu_mark = self._results.items.popleft()
        self._outstanding.popleft()   # its handles, and those of the unanswered code before it
        if value is _UNCONVERTED:
            value = self._ctx._value_handle_to_python(handle)
        return value, taken_early

    def terminate(self) -> bool:
        """Stops the JavaScript the isolate's thread runs now (V8's TerminateExecution, callable from
        any thread): the code unwinds uncatchably, the microtasks queued in that turn are dropped,
        and the isolate goes on with its next task. False before the thread has called back once."""
        isolate = self._thread_state.isolate
        if isolate is None:
            return False
        self._terminate(isolate)
        return True

    def cancel_termination(self) -> None:
        """Clears a termination that found no JavaScript to stop (what it was meant for had ended):
        left set, it would stop whatever runs next."""
        isolate = self._thread_state.isolate
        if isolate is not None:
            self._cancel_termination(isolate)

    def outstanding(self) -> int:
        """Answered evaluations posted and not yet taken."""
        return len(self._outstanding)

    def close(self) -> None:
        """After the isolate is closed (its thread then has ended)."""
        self._results.close()
        self._thread_state.free()

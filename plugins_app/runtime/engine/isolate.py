"""One locked-down V8 isolate shared by many accounts: start, evaluate, read progress, close."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import struct
import threading
import time
from typing import cast

# mini-racer is imported here and in v8_queue.py only; the other engine modules take its types from here.
from py_mini_racer import JSEvalException as JSEvalException
from py_mini_racer import JSFunction as JSFunction
from py_mini_racer import JSOOMException as JSOOMException
from py_mini_racer import MiniRacer as MiniRacer
from py_mini_racer import PythonJSConvertedTypes

from plugins_app.runtime import wire
from plugins_app.runtime.engine import jsassets
from plugins_app.runtime.engine.v8_queue import EvalQueue
from plugins_app.runtime.protocol import HandlerRef, JsonObject, Limits
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.tables.members import harness_members_json

# The harness's progress header: the entered invocation's run seq and handler index, the checkpoint's
# length, handler index and run seq, padding, and when that invocation entered the isolate.
_HEADER = struct.Struct("<6id")
CLOSE_TIMEOUT_SECONDS = 5.0
LOAD_TIMEOUT_SECONDS = 1.0   # loading one installation's code (its top level must finish by then)


class IsolateLost(Exception):
    """The isolate had to be given up: `kind` is a CrashKind value. For the chain whose handler cost
    it, `culprit` is True and `index`/`checkpoint` say where it was; chains parked beside it are
    bystanders (`culprit` False)."""

    def __init__(self, kind: str, *, culprit: bool = True, cpu_ms: int | None = None):
        super().__init__(kind)
        self.kind = kind
        self.culprit = culprit
        self.cpu_ms = cpu_ms
        self.index = 0
        self.checkpoint: JsonObject | None = None
        self.host_calls = 0


class LoadCostIsolate(Exception):
    """Loading `installation`'s code left the isolate unusable (`kind`, a CrashKind value)."""

    def __init__(self, kind: str, installation: str, message: str):
        super().__init__(message)
        self.kind, self.installation = kind, installation


def hook_table_json() -> str:
    table: JsonObject = {}
    for spec in HOOKS.values():
        table[spec.name] = {
            "mutable": list(spec.mutable),
            "types": {f.name: f.type for f in spec.mutable_fields()},
            "nullable": [f.name for f in spec.mutable_fields() if f.nullable],
            "minimum": {f.name: f.minimum for f in spec.mutable_fields() if f.minimum is not None},
            "cancellable": spec.cancellable,
        }
    return json.dumps(table)


class Isolate:
    """SES's lockdown() and the harness, loaded once; each account's installations get compartments."""

    def __init__(self, memory_mb: int, limits: Limits):
        self.memory_mb = memory_mb
        self.limits = limits
        self.mr: MiniRacer | None = None
        self.queue: EvalQueue | None = None
        self.stack = contextlib.AsyncExitStack()
        self._progress: memoryview | None = None
        self.run_chain_fn: JSFunction | None = None   # __hub.run
        self.poll_fn: JSFunction | None = None        # __hub.poll
        self.load_fn: JSFunction | None = None        # __hub.load
        self.entries: dict[str, JSFunction] = {}      # __hub.reply, fire, expire, abandon: ways back into a chain
        self.loaded: dict[str, str] = {}   # "account/installation" -> code hash held here

    async def start(self) -> Isolate:
        self.mr = MiniRacer()
        self.mr.set_hard_memory_limit(self.memory_mb * 1024 * 1024)
        self.queue = EvalQueue(self.mr)
        await self.eval(jsassets.ses_source(), 30)
        await self.eval(jsassets.web_polyfills_bundle_source(), 10)
        # Before lockdown() freezes the shared prototypes: sorts, scans and Intl objects a plugin's
        # one call may ask of native code are bounded (guards.js says why and how much).
        await self.eval(jsassets.guards_source(), 10)
        # localeTaming 'unsafe' keeps Date's and Number's toLocale* methods real: time-zone libraries
        # (dayjs's timezone plugin, luxon) read zones through them, and SES's 'safe' turns them into
        # plain toString (dayjs gave UTC for Berlin). What it costs: those methods show the engine's
        # default locale and time zone (a server's, the same for every tenant), which is all they leak.
        await self.eval(
            "lockdown({errorTaming: 'unsafe', stackFiltering: 'verbose', overrideTaming: 'severe',"
            " consoleTaming: 'unsafe', localeTaming: 'unsafe'}); 1", 10)
        await self.eval(jsassets.web_polyfills_source(), 10)
        await self.eval(jsassets.harness_source(), 10)
        seed = json.dumps(os.urandom(32).hex())   # the isolate's entropy: V8 inside SES has none
        await self.eval(f"__hub.init({json.dumps(hook_table_json())}, {json.dumps(self.limits.as_json())}, {seed},"
                        f" {json.dumps(harness_members_json())}); 1", 5)
        self._progress = cast(memoryview, await self.eval("__hub.progressBuffer", 5))
        # Chains start and are read by calls, not by evaluating source: a chain's request would
        # make every start a new script to compile.
        self.run_chain_fn = cast(JSFunction, await self.eval("__hub.run", 5))
        self.load_fn = cast(JSFunction, await self.eval("__hub.load", 5))
        self.poll_fn = cast(JSFunction, await self.eval("__hub.poll", 5))
        for name in ("reply", "fire", "expire", "abandon"):
            self.entries[name] = cast(JSFunction, await self.eval(f"__hub.{name}", 5))
        self.queue.prepare_calls(await self.eval("[]", 5))
        assert self.queue.thread_id is not None, "the evaluations above called back from the isolate's thread"
        return self

    def lacking(self, account: str, handlers: list[HandlerRef]) -> list[str]:
        """The ids of `handlers` ({id, hash}) whose compartment, at that hash, this isolate lacks."""
        return [h["id"] for h in handlers if self.loaded.get(f"{account}/{h['id']}") != h["hash"]]

    async def eval(self, code: str, timeout: float) -> PythonJSConvertedTypes:
        assert self.mr is not None, "evaluated in a started isolate"
        try:
            async with asyncio.timeout(timeout):   # cheaper than wait_for: no extra task per eval
                return await self.mr.eval_cancelable(code)
        except JSOOMException:
            raise IsolateLost("memory") from None

    def progress(self) -> tuple[int, int, float]:
        """(run seq, handler index) of the invocation that entered the isolate last, and when it
        entered, in ms since the epoch: while the isolate's thread is busy, the one holding it."""
        assert self._progress is not None, "read while the isolate is open"
        seq, index, _, _, _, _, entered = _HEADER.unpack_from(self._progress, 0)
        return seq, index, entered

    def checkpoint(self, seq: int, index: int) -> JsonObject | None:
        """Chain `seq`'s {context, trace} just before its handler `index` started, if the harness
        still holds it (it keeps the latest chain's to start a handler)."""
        assert self._progress is not None, "read while the isolate is open"
        _, _, length, before, owner, _, _ = _HEADER.unpack_from(self._progress, 0)
        if before != index or owner != seq or length < 0:
            return None
        raw = bytes(self._progress[_HEADER.size:_HEADER.size + 2 * length])
        kept: JsonObject = wire.loads(raw.decode("utf-16-le", "surrogatepass"))
        return kept

    def forget(self, account: str, ids: list[str]) -> None:
        """Drops these installations' compartments (their module state goes with them)."""
        if self.queue is None:
            return
        for inst_id in ids:
            self.loaded.pop(f"{account}/{inst_id}", None)
            self.queue.post(f"__hub.unload({json.dumps(account)}, {json.dumps(inst_id)}); 1", answered=False)

    async def collect(self) -> None:
        """Has V8 collect all it can, so memory that nothing holds any more (off-heap ArrayBuffers
        included) goes back to the system now. Off the event loop: collecting a large heap takes tens
        of milliseconds, and waits for a chain that is running; after what was posted before it (the
        isolate's thread takes its tasks in order)."""
        mr = self.mr
        if mr is None:
            return
        with contextlib.suppress(Exception):   # the isolate may be closed meanwhile: nothing to collect
            await asyncio.get_running_loop().run_in_executor(None, mr.low_memory_notification)

    async def heap_used(self) -> int:
        """Bytes in use on the isolate's heap (a count on the isolate's thread, under a millisecond)."""
        mr = self.mr
        if mr is None:
            return 0
        try:
            stats = await asyncio.get_running_loop().run_in_executor(None, mr.heap_stats)
        except Exception:   # closed meanwhile
            return 0
        return int(stats.get("used_heap_size", 0)) if isinstance(stats, dict) else 0

    def cpu_seconds(self) -> float:
        """CPU time the isolate's thread has used (each turn's is charged to the invocation that
        entered for it: engine/flights.py)."""
        thread = self.queue.thread_id if self.queue is not None else None
        if thread is None:
            return 0.0
        # Linux's clock id of one thread's CPU time (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)).
        return time.clock_gettime((~thread << 3) | 6)

    def memory_exceeded(self) -> bool:
        ctx = self.mr._ctx if self.mr is not None else None
        assert ctx is not None, "asked of an open isolate"
        return bool(ctx._dll.mr_hard_memory_limit_reached(ctx._ctx))

    async def close(self) -> None:
        """Free the isolate. Closing is also what stops JavaScript that never yields: freeing the
        context terminates whatever the isolate's thread is running, microtasks included."""
        self._progress = None   # a view of the isolate's memory: never read after the free
        with contextlib.suppress(Exception):
            await self.stack.aclose()
        mr, self.mr = self.mr, None
        if mr is None:
            return
        done = threading.Event()

        def free() -> None:
            mr.close()
            done.set()

        threading.Thread(target=free, daemon=True, name="isolate-close").start()
        if not await asyncio.get_running_loop().run_in_executor(None, done.wait, CLOSE_TIMEOUT_SECONDS):
            raise RuntimeError("a V8 isolate did not stop when closed")
        if self.queue is not None:
            self.queue.close()

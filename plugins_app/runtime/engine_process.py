"""A supervised V8 engine process: account isolates, chain runs and compiles for its parent."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sys
import time
from collections import OrderedDict
from multiprocessing.connection import Connection

import uvloop
from py_mini_racer import MiniRacer
from py_mini_racer._exc import JSEvalException, JSOOMException

from . import jsassets, wire
from .hooks import HOOKS
from .v8_queue import Early, EvalQueue, IsolateStuck

GRACE_SECONDS = 0.5        # slack over a handler's budget before its isolate counts as stuck
PENDING_POLL_SECONDS = 0.05
LOAD_TIMEOUT_SECONDS = 1.0
UNCHARGED_MEMBERS = {"ssh.command"}   # awaiting these does not count against the 5 s budget


class Fatal(Exception):
    """The isolate can no longer be trusted to answer: the engine must be replaced."""

    def __init__(self, kind: str, index: int | None = None):
        super().__init__(kind)
        self.kind = kind
        self.index = index


def hook_table_json() -> str:
    table = {}
    for spec in HOOKS.values():
        table[spec.name] = {
            "mutable": list(spec.mutable),
            "types": {f.name: f.type for f in spec.mutable_fields()},
            "nullable": [f.name for f in spec.mutable_fields() if f.nullable],
            "cancellable": spec.cancellable,
        }
    return json.dumps(table)


class Isolate:
    """One V8 isolate with SES locked down and the harness loaded; one per account."""

    def __init__(self, engine: "Engine", memory_mb: int):
        self.engine = engine
        self.memory_mb = memory_mb
        self.mr: MiniRacer | None = None
        self.queue: EvalQueue | None = None
        self.stack = contextlib.AsyncExitStack()

    async def start(self) -> None:
        self.mr = MiniRacer()
        self.mr.set_hard_memory_limit(self.memory_mb * 1024 * 1024)
        self.queue = EvalQueue(self.mr)
        await self.eval(jsassets.ses_source(), 10)
        await self.eval(
            "lockdown({errorTaming: 'unsafe', stackFiltering: 'verbose', overrideTaming: 'severe',"
            " consoleTaming: 'unsafe'}); 1", 10)
        py = await self.stack.enter_async_context(self.mr.wrap_py_function(self.engine.host_call))
        glob = await self.mr.eval_cancelable("globalThis")
        glob["__py"] = py
        await self.eval(jsassets.harness_source(), 10)
        await self.eval(
            f"__hub.init({json.dumps(hook_table_json())}, {json.dumps(json.dumps(self.engine.limits))}); 1", 5)

    async def eval(self, code: str, timeout: float):
        try:
            async with asyncio.timeout(timeout):   # cheaper than wait_for: no extra task per eval
                return await self.mr.eval_cancelable(code)
        except JSOOMException:
            raise Fatal("memory") from None

    async def close(self) -> None:
        await self.stack.aclose()
        if self.mr is not None:
            self.mr.close()
        if self.queue is not None:
            self.queue.close()


class Engine:
    def __init__(self, conn: Connection):
        self.conn = conn
        self.isolates: OrderedDict[str, Isolate] = OrderedDict()
        self.max_isolates = int(os.environ.get("HUB_ENGINE_MAX_ISOLATES", "32"))
        self.memory_mb = int(os.environ.get("HUB_ISOLATE_MEMORY_MB", "128"))
        self.limits = json.loads(os.environ.get("HUB_ENGINE_LIMITS", "{}")) or {
            "maxReason": 500, "maxValueChars": 1024 * 1024, "maxLogs": 100, "maxLogChars": 2000}
        self.compiler: MiniRacer | None = None
        self.probe: Isolate | None = None
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.host_waiters: dict[int, asyncio.Future] = {}
        self.next_call = 0
        self.host_activity = asyncio.Event()
        self.uncharged_seconds = 0.0
        self.uncharged_inflight = 0
        self.run_seq = 0
        self.early_id = None   # the run request that may be answered from the isolate's thread
        self.live_run: int | None = None   # host calls from any other run are refused

    # -- plumbing ---------------------------------------------------------------------------
    def send(self, message: dict) -> None:
        self.conn.send_bytes(wire.dumps(message))

    def _readable(self) -> None:
        try:
            message = wire.loads(self.conn.recv_bytes())
        except (EOFError, OSError):
            os._exit(0)
        if message.get("op") == "hostReply":
            waiter = self.host_waiters.pop(message["call"], None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
        else:
            self.inbox.put_nowait(message)

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_reader(self.conn.fileno(), self._readable)
        # uvloop makes the socket non-blocking; messages are framed and written whole, so a
        # large reply must block until the parent reads it rather than fail half-written.
        os.set_blocking(self.conn.fileno(), True)
        self.send({"op": "ready", "pid": os.getpid()})
        while True:
            message = await self.inbox.get()
            op = message.get("op")
            try:
                if op == "run":
                    self.early_id = message.get("id")
                    try:
                        reply = await self.run(message)
                    finally:
                        self.early_id = None
                    if reply.get("answeredEarly"):
                        continue
                elif op == "compile":
                    reply = await self.compile(message)
                elif op == "bench":
                    reply = await self.bench(message)
                elif op == "ping":
                    reply = {"pong": True, "isolates": list(self.isolates)}
                else:
                    reply = {"error": f"unknown op {op!r}"}
            except Fatal as fatal:
                self.send({"op": "result", "id": message.get("id"), "fatal": fatal.kind,
                           "index": fatal.index})
                os._exit(3)  # a wedged isolate's thread would keep a normal exit waiting forever
            self.send({"op": "result", "id": message.get("id"), **reply})
            if reply.get("restart"):
                os._exit(3)

    # -- host calls from JS -----------------------------------------------------------------
    async def host_call(self, raw) -> str:
        request = wire.loads(raw)
        if request.get("run") != self.live_run:
            # Fired without being awaited, and its chain ended before the call was served: the
            # next chain's host must not answer it in that chain's context.
            return wire.dumps({"ok": False, "value": None,
                               "error": f"host.{request['member']}: the chain that called it is over"}).decode()
        self.next_call += 1
        call = self.next_call
        waiter = asyncio.get_running_loop().create_future()
        self.host_waiters[call] = waiter
        uncharged = request["member"] in UNCHARGED_MEMBERS
        started = time.monotonic()
        if uncharged:
            self.uncharged_inflight += 1
        self.send({"op": "host", "call": call, "handler": request.get("handler"),
                   "member": request["member"], "args": request.get("args", [])})
        try:
            reply = await waiter
        finally:
            if uncharged:
                self.uncharged_inflight -= 1
                self.uncharged_seconds += time.monotonic() - started
        self.host_activity.set()
        return wire.dumps({"ok": reply.get("ok", False), "value": reply.get("value"),
                           "error": reply.get("error")}).decode()

    # -- isolates -----------------------------------------------------------------------------
    async def isolate(self, account: str) -> Isolate:
        iso = self.isolates.get(account)
        if iso is not None:
            self.isolates.move_to_end(account)
            return iso
        iso = Isolate(self, self.memory_mb)
        await iso.start()
        self.isolates[account] = iso
        while len(self.isolates) > self.max_isolates:
            _, old = self.isolates.popitem(last=False)
            await old.close()
        return iso

    async def load(self, iso: Isolate, code: dict) -> None:
        for inst_id, item in code.items():
            await iso.eval(
                f"__hub.load({json.dumps(inst_id)}, {json.dumps(item['hash'])}, "
                f"{json.dumps(item['code'])}, {json.dumps(json.dumps(item.get('config') or {}))})",
                LOAD_TIMEOUT_SECONDS)

    # -- chains -------------------------------------------------------------------------------
    async def run(self, req: dict) -> dict:
        iso = await self.isolate(req["account"])
        if req.get("code"):
            try:
                await self.load(iso, req["code"])
            except (JSEvalException, asyncio.TimeoutError) as exc:
                return {"loadError": str(exc)[:500]}
        handlers = req["handlers"]
        budget = req["budgetMs"] / 1000
        trace: list = []
        context = req["context"]
        offset = 0
        while True:
            payload = dict(req, handlers=handlers[offset:], context=context)
            payload.pop("code", None)
            outcome = await self._run_once(iso, payload, budget, offset)
            if outcome.get("answeredEarly"):
                return outcome
            trace.extend(outcome.get("trace", []))
            if "abandoned" not in outcome:
                outcome["trace"] = trace
                return outcome
            # A handler hogged the CPU synchronously and was terminated: skip it and go on.
            stuck = outcome["abandoned"]
            context = wire.loads(outcome["contextJson"])
            skipped = {"id": handlers[offset + stuck]["id"], "status": "timeout", "changed": False,
                       "durationMs": round(budget * 1000), "warning": f"no result within {req['budgetMs']} ms",
                       "logs": [], "logsDropped": 0, "hostCalls": 0}
            if req.get("traceValues"):
                skipped["context"] = context
            trace.append(skipped)
            offset += stuck + 1
            if offset >= len(handlers):
                return {"done": True, "trace": trace, "context": context, "cancellation": None}

    async def _run_once(self, iso: Isolate, payload: dict, budget: float, offset: int) -> dict:
        self.run_seq += 1
        self.live_run = payload["seq"] = self.run_seq
        try:
            return await self._run_started(iso, payload, budget, offset)
        finally:
            self.live_run = None

    async def _run_started(self, iso: Isolate, payload: dict, budget: float, offset: int) -> dict:
        self.uncharged_seconds = 0.0
        # The poll is queued right behind the run: the isolate settles the chain's microtasks
        # between the two, so a chain that never awaits the host costs one round trip, not two.
        early = None
        if self.early_id is not None and offset == 0:
            early = Early(self._early_answer, self.conn.send_bytes, self.conn.fileno())
        evals = iso.queue
        evals.post(f"__hub.run({wire.js_string(payload)})", answered=False)
        evals.post("__hub.poll()", early=early)
        try:
            try:
                raw, answered = evals.take(budget + GRACE_SECONDS)
                if answered:
                    return {"answeredEarly": True}
            except asyncio.TimeoutError:
                # The isolate answered the cancel, so a handler was hogging the CPU inside the run
                # itself (stuck microtasks never answer): it was terminated; resume after it.
                info = wire.loads(await iso.eval("__hub.abandon()", 1))
                if info.get("idle"):
                    raise Fatal("stuck", offset) from None
                return {"abandoned": info["index"], "trace": info["trace"], "contextJson": info["contextJson"]}
        except IsolateStuck:
            raise Fatal("stuck", offset) from None
        except JSOOMException:
            raise Fatal("memory") from None
        last_index = 0
        invocation, deadline = None, None
        while True:
            if raw is None:
                try:
                    raw = await iso.eval("__hub.poll()", self._poll_timeout(deadline, budget))
                except asyncio.TimeoutError:
                    raise Fatal("stuck", offset + last_index) from None
            status, raw = wire.loads(raw), None
            if "missing" in status:
                return status
            if status.get("idle"):   # the start itself threw: a harness fault, not a plugin's
                raise Fatal("crashed", offset + last_index)
            if status.get("done"):
                if "cancellation" in status and status["cancellation"]:
                    status["cancellation"]["index"] += offset
                return status
            last_index = status["index"]
            if status["invocation"] != invocation:
                invocation = status["invocation"]
                self.uncharged_seconds = 0.0
                deadline = status["started"] / 1000 + budget
            effective_deadline = deadline + self.uncharged_seconds
            if time.time() >= effective_deadline and not self.uncharged_inflight:
                await iso.eval(f"__hub.expire({invocation}); 1", 1)
                continue
            self.host_activity.clear()
            wait = min(PENDING_POLL_SECONDS, max(0.0, effective_deadline - time.time()))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.host_activity.wait(), wait or PENDING_POLL_SECONDS)

    def _early_answer(self, value) -> bytes | None:
        """On the isolate's thread: the reply to a chain that finished without the host, so the
        parent gets it without waiting for this process's main thread to wake."""
        if not isinstance(value, str) or not value.startswith('{"done":true,'):
            return None
        try:
            return b'{"op":"result","id":' + wire.dumps(self.early_id) + b"," + value[1:].encode()
        except UnicodeEncodeError:
            return None

    def _poll_timeout(self, deadline: float | None, budget: float) -> float:
        """How long the isolate may stay silent before it counts as stuck."""
        if deadline is None:
            return budget + GRACE_SECONDS
        return max(0.0, deadline + self.uncharged_seconds - time.time()) + GRACE_SECONDS

    async def bench(self, req: dict) -> dict:
        """Run the same chain `n` times inside this process, exactly as a request would but
        without the parent's IPC: the engine's own throughput."""
        run = dict(req, op="run")
        first = await self.run(run)
        if "missing" in first or "loadError" in first:
            return first
        started = time.perf_counter()
        for _ in range(req["n"]):
            result = await self.run(run)
        return {"seconds": time.perf_counter() - started, "n": req["n"], "sample": result["context"]}

    # -- compile ------------------------------------------------------------------------------
    async def compile(self, req: dict) -> dict:
        if self.compiler is None:
            self.compiler = MiniRacer()
            await asyncio.wait_for(self.compiler.eval_cancelable(jsassets.typescript_source()), 30)
            await asyncio.wait_for(self.compiler.eval_cancelable(jsassets.compiler_source()), 5)
        file_name = "plugin.ts" if req.get("language") == "typescript" else "plugin.js"
        try:
            raw = await asyncio.wait_for(self.compiler.eval_cancelable(
                f"__compile({json.dumps(req['source'])}, {json.dumps(file_name)})"), 10)
        except asyncio.TimeoutError:
            return {"errors": [{"message": "the source took too long to parse", "line": 1, "column": 1}]}
        result = json.loads(raw)
        if result["errors"]:
            return {"errors": result["errors"]}
        code = result["code"]
        if self.probe is None:
            self.probe = Isolate(self, self.memory_mb)
            await self.probe.start()
        probe_id = "probe-" + hashlib.sha256(code.encode()).hexdigest()[:16]
        try:
            hooks = json.loads(await self.probe.eval(
                f"__hub.load({json.dumps(probe_id)}, 'probe', {json.dumps(code)}, '{{}}')", LOAD_TIMEOUT_SECONDS))
            await self.probe.eval(f"__hub.unload({json.dumps(probe_id)}); 1", LOAD_TIMEOUT_SECONDS)
        except asyncio.TimeoutError:
            await self._drop_probe()
            return {"errors": [{"message": f"top-level code did not finish within {LOAD_TIMEOUT_SECONDS:g} s",
                                "line": 1, "column": 1}]}
        except Fatal:
            await self._drop_probe()
            return {"errors": [{"message": "top-level code ran out of memory", "line": 1, "column": 1}]}
        except JSEvalException as exc:
            return {"errors": [_load_error(exc)]}
        try:
            # Code scheduled as a microtask at load time (async IIFE) runs after the eval above.
            await self.probe.eval("1", LOAD_TIMEOUT_SECONDS)
        except (asyncio.TimeoutError, Fatal):
            return {"errors": [{"message": "top-level code never settles (runaway async work)",
                                "line": 1, "column": 1}], "restart": True}
        return {"errors": [], "code": code, "hooks": hooks, "hostMembers": result["hostMembers"]}

    async def _drop_probe(self) -> None:
        probe, self.probe = self.probe, None
        if probe is not None:
            with contextlib.suppress(Exception):
                await probe.close()


def _load_error(exc: JSEvalException) -> dict:
    text = str(exc)
    first = text.splitlines()[0] if text else "error"
    # V8 reports "<anonymous>:LINE: Message" for top-level failures; keep the position.
    line = 1
    parts = first.split(":", 2)
    if len(parts) == 3 and parts[1].strip().isdigit():
        line, first = int(parts[1]), parts[2].strip()
    return {"message": first[:500], "line": line, "column": 1}


def main() -> None:
    fd = int(sys.argv[1])
    conn = Connection(fd)
    uvloop.run(Engine(conn).serve())   # fewer wake-up costs per request than asyncio's own loop


if __name__ == "__main__":
    main()

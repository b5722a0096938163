"""One chain inside an engine: start it, follow it, and go on past a handler that cost its isolate."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import cast

from plugins_app.runtime import wire
from plugins_app.runtime.config import DEFAULT_CPU_MS
from plugins_app.runtime.engine.api import EngineSide
from plugins_app.runtime.engine.isolate import (
    Isolate,
    IsolateLost,
    JSEvalException,
    JSFunction,
    JSOOMException,
    LoadCostIsolate,
)
from plugins_app.runtime.engine.v8_queue import Early, EvalQueue
from plugins_app.runtime.protocol import CrashKind, HandlerRef, Job, JsonObject, Op, RunResult, RunState, TraceEntry

GRACE_SECONDS = 0.05         # slack over a handler's budget before a silent isolate counts as wedged
SLICE_SECONDS = 0.05         # how often a running chain's progress is looked at
SLOW_NOTICE_SECONDS = 0.5    # a handler keeping the isolate's thread this long is reported once
HOLD_SECONDS = 1.0           # ...and this long: its thread yields the CPU, its account's other calls skip it
# A handler still running after BURN_SECONDS that has computed for BURN_CPU_SECONDS of it gets the
# lowest nice value at once (the scheduler still gives it its turn, so a legitimate computation
# finishes, only later on a busy machine): a runaway's first second at full priority was what other
# accounts' slowest calls waited for. CPU time, not its share of the wall clock: on a loaded machine
# a spinning thread gets well under a full core. SCHED_IDLE, which can starve a thread, waits for HOLD_SECONDS.
BURN_SECONDS = 0.1
BURN_CPU_SECONDS = 0.05
DEMOTED_NICE = 19
# CPU a handler may use past its HUB_CPU_MS before an isolate that has not yet taken the expiry
# (it never yields) is closed: enough for a yielding handler to see its expiry posted a slice ago.
CPU_GRACE_SECONDS = 0.1


CRASH_WARNINGS = {
    CrashKind.WEDGED.value: "never yielded within {budget} ms (its isolate was closed and replaced)",
    CrashKind.MEMORY.value: "exceeded the isolate's memory limit (its isolate was replaced)",
    CrashKind.CRASHED.value: "broke the chain runner (its isolate was replaced)",
}
CPU_WARNING = "used over {cpu} ms of CPU without yielding (HUB_CPU_MS; its isolate was closed and replaced)"


async def run_chain(engine: EngineSide, job: Job) -> RunResult:
    req = job.message
    account = req["account"]
    if req.get("code"):
        engine.remember(account, req["code"])
    handlers = req["handlers"]
    hashes = {h["id"]: h["hash"] for h in handlers}
    trace: list[TraceEntry] = []
    context = req["context"]
    offset = 0
    # A handler with something to be told (a memory charge, state that was lost) gets its answer
    # through this loop, where the trace can carry it, never early from the isolate's thread.
    told = engine.memory.pending(account, hashes)
    while True:
        iso = await engine.ready_isolate()
        batch = handlers[offset:]
        try:
            # Compartments this isolate is known to lack are loaded before the start: finding out
            # from a start that answers `missing` would cost a first call a second start. The
            # harness still says `missing` if it lacks one after all; that is loaded and tried once more.
            # (A chain the engine started on arrival had nothing to load.)
            wanted = [] if job.started_state is not None else iso.lacking(account, batch)
            for _ in range(2):
                if wanted and (problem := await _load(engine, iso, account, wanted, hashes)):
                    return problem
                outcome = await _attempt(engine, iso, job, batch, context, early=offset == 0 and not told)
                if "missing" not in outcome:
                    break
                wanted = outcome["missing"]
        except IsolateLost as lost:
            # Every other installation in the isolate is told its state went; the culprit is told by its crash.
            culprit = None if lost.kind == CrashKind.CRASHED.value else f"{account}/{batch[lost.index]['id']}"
            await engine.replace_isolate(f"a handler of another installation {_WHY.get(lost.kind, 'broke it')}",
                                         culprit=culprit)
            if culprit is None:   # the harness failed, not a handler: blame nobody
                return {"fatal": lost.kind}
            context, lost_trace = _resume_point(req, batch, lost, context)
            trace.extend(lost_trace)
            offset += lost.index + 1
            if offset >= len(handlers):
                return {"done": True, "trace": _told(engine, account, trace), "context": context,
                        "cancellation": None}
            continue
        if "missing" in outcome or outcome.get("answeredEarly"):
            return outcome
        if cancelled := outcome.get("cancellation"):
            cancelled["index"] += offset
        outcome["trace"] = _told(engine, account, trace + outcome.get("trace", []))
        return outcome


_WHY = {CrashKind.WEDGED.value: "never yielded", CrashKind.MEMORY.value: "ran out of memory"}


def _told(engine: EngineSide, account: str, trace: list[TraceEntry]) -> list[TraceEntry]:
    """Puts on each entry what its installation must be told: a memory charge (a crash of kind
    memory, so the web side strikes it) or module state that had to go (no strike)."""
    for entry in trace:
        note = engine.memory.take_note(account, entry["id"])
        if note is None:
            continue
        text, charged = note
        if charged:
            entry["crash"] = CrashKind.MEMORY.value
            entry["warning"] = text
        else:
            entry["stateReset"] = text
    return trace


async def _load(engine: EngineSide, iso: Isolate, account: str, ids: list[str],
                hashes: dict[str, str]) -> RunResult | None:
    """Loads `ids` into the isolate: None once they are there, else the answer to give instead
    ({"missing"} for code the engine's cache lacks, {"loadError"} for code that failed to load)."""
    try:
        absent = await engine.load_missing(iso, account, ids, hashes)
    except LoadCostIsolate as exc:   # named, so it counts against that installation like a wedge
        await engine.replace_isolate()
        return {"loadError": str(exc), "loadCrash": exc.kind, "loadCulprit": exc.installation}
    except JSEvalException as exc:
        return {"loadError": str(exc)[:500]}
    return {"missing": absent} if absent else None


def _where(iso: Isolate, state: RunState | None) -> tuple[int, JsonObject | None]:
    """Which handler of the batch was running when the isolate was lost, and the chain before it."""
    seq, index, _ = iso.progress()
    if state is None or seq != state.seq or index < 0:
        return 0, None
    return index, (iso.checkpoint(index) if index > 0 else None)


def _resume_point(req: JsonObject, batch: list[HandlerRef], lost: IsolateLost,
                  context: JsonObject) -> tuple[JsonObject, list[TraceEntry]]:
    budget, index, checkpoint, kind = req["budgetMs"], lost.index, lost.checkpoint, lost.kind
    before: list[TraceEntry] = []
    if index > 0 and checkpoint is not None:
        context, before = checkpoint["context"], checkpoint["trace"]
    elif index > 0:   # the chain's value was too large to keep: the handlers before lose their effect
        before = [_entry(h["id"], "error", "its result was lost when a later handler's isolate was replaced",
                         0, None) for h in batch[:index]]
    status = "timeout" if kind == CrashKind.WEDGED.value else "error"
    warning = (CPU_WARNING.format(cpu=lost.cpu_ms) if lost.cpu_ms is not None
               else CRASH_WARNINGS[kind].format(budget=budget))
    culprit = _entry(batch[index]["id"], status, warning, budget if kind == CrashKind.WEDGED.value else 0, kind)
    if req.get("traceValues"):
        culprit["context"] = context
    return context, before + [culprit]


def _entry(handler_id: str, status: str, warning: str, duration_ms: float, crash: str | None) -> TraceEntry:
    entry: TraceEntry = {"id": handler_id, "status": status, "changed": False, "durationMs": duration_ms,
             "warning": warning, "logs": [], "logsDropped": 0, "hostCalls": 0}
    if crash:
        entry["crash"] = crash
    return entry


def start_attempt(engine: EngineSide, iso: Isolate, job: Job, batch: list[HandlerRef], context: JsonObject,
                  early: bool) -> RunState:
    """Posts the chain's start and the read of its outcome to the isolate's thread. A malformed
    request raises (KeyError, TypeError) before anything changes."""
    req = job.message
    queue = _queue(iso)
    seq = engine.run_seq + 1
    handler_ids = [h["id"] for h in batch]
    payload = {"account": req["account"], "hook": req["hook"], "context": context, "budgetMs": req["budgetMs"],
               "host": req["host"], "traceValues": req.get("traceValues", False), "handlers": batch,
               "seq": seq, "entropy": os.urandom(32).hex()}   # reseeds the isolate's crypto
    body = wire.dumps(payload).decode()
    answer = None
    if early and req.get("op") == Op.RUN.value:
        answer = Early(lambda value: _early_bytes(job, value), job.client.conn.send_bytes)
    engine.run_seq = seq
    state = engine.state = RunState(seq=seq, job=job, handler_ids=handler_ids, cpu_started=iso.cpu_seconds(),
                                    cpu_ms=_cpu_ms(req))
    queue.post_call(_function(iso.run_chain_fn), body, answered=False)
    queue.post_call(_function(iso.poll_fn), early=answer)
    return state


async def _attempt(engine: EngineSide, iso: Isolate, job: Job, batch: list[HandlerRef], context: JsonObject,
                   early: bool) -> RunResult:
    req = job.message
    budget = req["budgetMs"] / 1000
    lost = False
    state = job.started_state   # the engine may have started the first attempt on arrival
    job.started_state = None
    if state is None:
        state = start_attempt(engine, iso, job, batch, context, early)
    try:
        raw, answered = await _answer(engine, iso, state, budget)
        if answered:
            return {"answeredEarly": True}
        return await _follow(engine, iso, state, budget, raw)
    except IsolateLost as lost_isolate:
        lost = True
        # Read where the chain was now: the isolate's memory is gone once it is replaced.
        lost_isolate.index, lost_isolate.checkpoint = _where(iso, state)
        raise
    finally:
        if engine.state is state:
            engine.state = None
        if (state.holder is not None or state.lowered) and not lost and not engine.restore(iso):
            await engine.replace_isolate()   # its thread can't get its priority back: start afresh


async def _follow(engine: EngineSide, iso: Isolate, state: RunState, budget: float, raw: object) -> RunResult:
    """Polls a chain that awaits something (the host, a timer-less promise) until it settles,
    expiring a handler whose wall-clock budget ran out."""
    queue = _queue(iso)
    while True:
        status: JsonObject = wire.loads(cast(str, raw))   # the harness's poll answers JSON text
        if "missing" in status or status.get("done"):
            if status.get("fatal"):
                raise IsolateLost(CrashKind.CRASHED.value)
            return cast(RunResult, status)
        if status.get("idle"):   # the start itself threw: a harness fault, not a plugin's
            raise IsolateLost(CrashKind.CRASHED.value)
        _, index, started = iso.progress()
        _note_index(state, index, iso)
        deadline = started / 1000 + budget + state.uncharged_seconds
        # CPU counts even while a host call is out: timers and microtasks can burn it meanwhile.
        over_cpu = _cpu_used(iso, state) > state.cpu_ms / 1000
        if over_cpu or (time.time() >= deadline and not state.uncharged_inflight):
            queue.post(f"__hub.expire({index}, {state.cpu_ms if over_cpu else 0}); 1", answered=False)
        else:
            engine.host_activity.clear()
            wait = min(SLICE_SECONDS, max(0.0, deadline - time.time())) or SLICE_SECONDS
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await engine.host_activity.wait()
        queue.post_call(_function(iso.poll_fn))
        raw, _ = await _answer(engine, iso, state, budget)


async def _answer(engine: EngineSide, iso: Isolate, state: RunState, budget: float) -> tuple[object, bool]:
    """The next queued evaluation's value (and whether it was answered early). Waits in slices,
    watching the running handler through the progress buffer: past its budget with the isolate
    still silent, the isolate is lost."""
    queue = _queue(iso)
    wait = SLICE_SECONDS
    while True:
        if await queue.wait(wait):
            try:
                value = queue.take_ready()
            except JSOOMException:
                raise IsolateLost(CrashKind.MEMORY.value) from None
            if iso.memory_exceeded():
                raise IsolateLost(CrashKind.MEMORY.value)
            return value
        if iso.memory_exceeded() or engine.memory.over_bound():   # the heap's limit, or the process's
            raise IsolateLost(CrashKind.MEMORY.value)
        seq, index, started = iso.progress()
        if seq != state.seq:
            continue
        _note_index(state, index, iso)
        if _cpu_used(iso, state) > state.cpu_ms / 1000 + CPU_GRACE_SECONDS:   # over its CPU and not yielding
            raise IsolateLost(CrashKind.WEDGED.value, cpu_ms=state.cpu_ms)
        held = time.time() - started / 1000
        if not state.lowered and held > BURN_SECONDS and _cpu_used(iso, state) > BURN_CPU_SECONDS:
            state.lowered = True
            engine.lower(iso)
        if not state.slow_noticed and held > SLOW_NOTICE_SECONDS and not state.uncharged_inflight:
            state.slow_noticed = True
            if 0 <= index < len(state.handler_ids):
                state.job.client.send({"op": Op.SLOW.value, "handler": state.handler_ids[index],
                                       "heldMs": round(held * 1000)})
        if state.holder is None and held > HOLD_SECONDS and not state.uncharged_inflight:
            if 0 <= index < len(state.handler_ids):
                state.holder = state.handler_ids[index]
                engine.held_long(iso)
        overdue = held - (budget + state.uncharged_seconds + GRACE_SECONDS)
        if overdue > 0 and not state.uncharged_inflight:
            raise IsolateLost(CrashKind.WEDGED.value)
        wait = min(SLICE_SECONDS, max(0.005, -overdue))   # wake right at the deadline, not a slice past it


def _queue(iso: Isolate) -> EvalQueue:
    assert iso.queue is not None, "a started isolate has its queue"
    return iso.queue


def _function(function: JSFunction | None) -> JSFunction:
    assert function is not None, "a started isolate has its harness's functions"
    return function


def _note_index(state: RunState, index: int, iso: Isolate) -> None:
    if index != state.index:   # a new handler: what it waits on uncharged starts from zero
        if state.index >= 0:   # ...and so does its CPU (the first handler's counts from the chain's start)
            state.cpu_started = iso.cpu_seconds()
        state.index = index
        state.uncharged_seconds = 0.0


def _cpu_ms(req: JsonObject) -> int:
    value = req.get("cpuMs")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else DEFAULT_CPU_MS


def _cpu_used(iso: Isolate, state: RunState) -> float:
    """CPU seconds the isolate's thread has used since the running handler started (or was noticed)."""
    return iso.cpu_seconds() - state.cpu_started


def _early_bytes(job: Job, value: object) -> bytes | None:
    """On the isolate's thread: the reply to a chain that finished without the host, so the web
    process gets it without waiting for this process's main thread to wake."""
    if not isinstance(value, str) or not value.startswith('{"done":true,'):
        return None
    try:
        return b'{"op":"result","id":' + wire.dumps(job.message.get("id")) + b"," + value[1:].encode()
    except UnicodeEncodeError:
        return None

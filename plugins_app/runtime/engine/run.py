"""One chain inside an engine: start it, follow it, and go on past a handler that cost its isolate."""

from __future__ import annotations

import os
from typing import cast

from plugins_app.runtime import wire
from plugins_app.runtime.config import DEFAULT_CPU_MS
from plugins_app.runtime.engine.api import EngineSide
from plugins_app.runtime.engine.flights import CPU_WARNING, CRASH_WARNINGS, Flight, bystander_trace
from plugins_app.runtime.engine.isolate import Isolate, IsolateLost, JSEvalException, LoadCostIsolate
from plugins_app.runtime.engine.v8_queue import Early
from plugins_app.runtime.protocol import CrashKind, HandlerRef, Job, JsonObject, Op, RunResult, TraceEntry

DEMOTED_NICE = 19
RESTARTS = 2   # a chain that had called out nowhere yet is started again this often on a new isolate


async def run_chain(engine: EngineSide, job: Job, started: Flight | None = None) -> RunResult:
    """`started`: the chain's flight, when it started on arrival (start_now)."""
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
    restarts = 0
    while True:
        iso = await engine.ready_isolate()
        batch = handlers[offset:]
        try:
            # Compartments this isolate is known to lack are loaded before the start: finding out
            # from a start that answers `missing` would cost a first call a second start. The
            # harness still says `missing` if it lacks one after all; that is loaded and tried once more.
            wanted = [] if started is not None else iso.lacking(account, batch)
            for _ in range(2):
                if wanted and (problem := await _load(engine, iso, account, wanted, hashes)):
                    return problem
                outcome = await _attempt(engine, iso, job, batch, context, early=offset == 0 and not told,
                                         started=started)
                started = None
                if "missing" not in outcome:
                    break
                wanted = outcome["missing"]
        except IsolateLost as lost:
            if not lost.culprit:
                # Parked here when another chain's handler cost the isolate. Nothing external has
                # happened yet: start again on the new one. Otherwise running it again could do
                # twice what it did: it fails open from here, without strikes.
                if lost.host_calls == 0 and restarts < RESTARTS:
                    restarts += 1
                    continue
                trace.extend(bystander_trace([h["id"] for h in batch]))
                return {"done": True, "trace": _told(engine, account, trace), "context": context,
                        "cancellation": None}
            if lost.kind == CrashKind.CRASHED.value:   # the harness failed, not a handler: blame nobody
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


def start_now(engine: EngineSide, job: Job) -> Flight | None:
    """Starts a warm chain the moment its request is read (no task switch before the isolate's thread
    has it: the reader's own bookkeeping first delayed its start); None when it must go the long way
    (code to load, a note for its trace, a malformed request)."""
    req = job.message
    iso = engine.isolate
    try:
        if req.get("op") != Op.RUN.value or req.get("code") or iso is None:
            return None
        handlers = req["handlers"]
        if iso.lacking(req["account"], handlers) or engine.memory.pending(req["account"], (h["id"] for h in handlers)):
            return None
        return _start(engine, iso, job, handlers, req["context"], early=True)
    except (KeyError, TypeError):   # malformed: the long way answers it as a fault
        return None


async def _attempt(engine: EngineSide, iso: Isolate, job: Job, batch: list[HandlerRef], context: JsonObject,
                   early: bool, started: Flight | None = None) -> RunResult:
    """Starts the chain (these handlers of it) in the isolate, unless it started on arrival, and waits,
    parked, for its answer."""
    flight = started if started is not None else _start(engine, iso, job, batch, context, early)
    status, answered = await flight.finished
    if answered:
        return {"answeredEarly": True}
    if status.get("idle") or status.get("fatal"):   # the harness itself failed: not a plugin's doing
        raise IsolateLost(CrashKind.CRASHED.value)
    return cast(RunResult, status)


def _start(engine: EngineSide, iso: Isolate, job: Job, batch: list[HandlerRef], context: JsonObject,
           early: bool) -> Flight:
    req = job.message
    seq = engine.run_seq = engine.run_seq + 1
    payload = {"account": req["account"], "hook": req["hook"], "context": context, "budgetMs": req["budgetMs"],
               "host": req["host"], "traceValues": req.get("traceValues", False), "handlers": batch,
               "seq": seq, "entropy": os.urandom(32).hex()}   # reseeds the isolate's crypto
    answer = None
    if early and req.get("op") == Op.RUN.value:
        answer = Early(lambda value: _early_bytes(job, value), job.client.send_bytes)
    return engine.flights_for(iso).start(job, seq, wire.dumps(payload).decode(), [h["id"] for h in batch],
                                         req["budgetMs"], _cpu_ms(req), answer)


def _cpu_ms(req: JsonObject) -> int:
    value = req.get("cpuMs")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else DEFAULT_CPU_MS


def _early_bytes(job: Job, value: object) -> bytes | None:
    """On the isolate's thread: the reply to a chain that finished without the host, so the web
    process gets it without waiting for this process's main thread to wake."""
    if not isinstance(value, str) or not value.startswith('{"done":true,'):
        return None
    try:
        return b'{"op":"result","id":' + wire.dumps(job.message.get("id")) + b"," + value[1:].encode()
    except UnicodeEncodeError:
        return None

"""Runs one hook's chain for an account: plain data in, plain data out, fail-open throughout (but for
EngineUnavailable: no engine took the chain, so nothing ran)."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from plugins_app.runtime import positions
from plugins_app.runtime.config import DEFAULT_BUDGET_MS, DEFAULT_CPU_MS
from plugins_app.runtime.protocol import (
    FAILED_STATUSES,
    CrashKind,
    HostPlan,
    JsonObject,
    Op,
    RunRequest,
    RunResult,
    TraceEntry,
)
from plugins_app.runtime.tables.error_hints import explain
from plugins_app.runtime.tables.hooks import HookSpec
from plugins_app.runtime.tables.members import OFFERED_BY
from plugins_app.runtime.web.tier import EngineDown, EngineUnavailable, Tier

SESSION_HOP_LIMIT = 4   # host.session (peer messages) is offered up to this hop, not beyond
QUARANTINE_WARNING = "skipped: quarantined until {until} after repeated timeouts"
HELD_BACK_WARNING = "skipped: another call of this handler has held its engine for over a second"
SKIPPED = "skipped"   # left out before the engine: the plugin's matcher did not hold (`reason` says so)
NOT_RUN = ("quarantined", SKIPPED)   # statuses of handlers that did not run: never metered or timed
# A handler that timed out while the hub itself kept it waiting for at least this share of its budget
# (its host calls in the web process's queue and lag under overload, its replies on the engine's line
# behind other chains; never the awaited service) is not charged: its timeout counts towards no
# quarantine. A healthy hub keeps a handler waiting a few milliseconds.
HUB_HELD_SHARE = 0.1
HUB_HELD_WARNING = "; the hub itself kept it waiting {ms:.0f} ms, so this timeout is not counted against it"
MISBEHAVIOUR_CRASHES = {CrashKind.WEDGED.value, CrashKind.MEMORY.value}   # count towards quarantine, as timeouts do
MISSING_TRIES = 3   # requests sent again, with the code, to engines that answer that they lack it


@dataclass(frozen=True)
class Handler:
    """One installation's handler in a chain, with the compiled code the engine may need."""

    installation_id: str
    plugin: str
    code_hash: str
    code: str
    config: JsonObject = field(default_factory=dict)
    granted: frozenset[str] = frozenset()
    quarantined_until: float | None = None   # epoch seconds; skipped without running until then
    slow_lane_until: float | None = None     # epoch seconds; runs in the engine tier's lane until then
    version: int | None = None               # the installation's deployed version, for the audit rows
    # {hook: matcher} (runtime/matching/): when the plugin wants each handler to run; the seam leaves
    # a handler whose matcher does not hold out before the chain goes to an engine.
    matchers: JsonObject = field(default_factory=dict)

    def quarantined(self, now: float) -> bool:
        return self.quarantined_until is not None and now < self.quarantined_until

    def in_slow_lane(self, now: float) -> bool:
        return self.slow_lane_until is not None and now < self.slow_lane_until


@dataclass
class HandlerTrace:
    installation_id: str
    plugin: str
    status: str            # ran | cancelled | error | timeout | malformed | quarantined | skipped
    changed: bool
    duration_ms: float
    warning: str | None = None
    logs: list[Any] = field(default_factory=list)   # as the harness sent them: {"level", "message", "at"}
    crash: str | None = None   # a CrashKind value when this handler cost its isolate or engine
    value: Any = None      # the hook's value after this handler; filled only when asked for
    quarantined_until: float | None = None   # set when it was skipped for a quarantine (epoch seconds)
    state_reset: str | None = None   # why its module state started afresh, when another's fault made it
    at: JsonObject | None = None     # {"line", "column"} in the author's source where it failed
    reason: str | None = None        # why a `skipped` handler was left out: "match" (its matcher did not hold)
    hub_held_ms: float = 0.0         # a timeout the hub's own delays made (HUB_HELD_SHARE): not the plugin's

    @property
    def misbehaved(self) -> bool:
        """Whether this entry is a timeout or crash of the plugin's own making (strikes count these)."""
        return (self.status == "timeout" and not self.hub_held_ms) or self.crash in MISBEHAVIOUR_CRASHES

    @property
    def engine_restarted(self) -> bool:
        return self.crash is not None


@dataclass
class Cancellation:
    installation_id: str
    plugin: str
    reason: str


@dataclass
class ChainResult:
    hook: str
    outcome: str           # unchanged | changed | cancelled
    context: JsonObject
    value: Any
    cancellation: Cancellation | None
    trace: list[HandlerTrace]


HostFunction = Callable[[Handler, str, list[Any]], Any]   # raises HostError to reject the JS promise


class HostError(Exception):
    """A host member refused or failed; the message reaches the plugin as a rejected promise."""


def host_plan(spec: HookSpec, context: JsonObject, hop: int = 0) -> HostPlan:
    """Which optional host members this invocation gets (session, workspace, ssh: see runtime/tables/members.py)."""
    session = None
    field_name = spec.session_field   # set whenever the session member is offered
    if OFFERED_BY["session"](spec) and field_name is not None and hop <= SESSION_HOP_LIMIT:
        session = {
            "id": context.get(field_name),
            "agentId": context.get(spec.agent_field) if spec.agent_field else None,
            "kind": context.get("sessionKind"),
        }
    return {"session": session, "workspace": OFFERED_BY["workspace"](spec), "ssh": OFFERED_BY["ssh"](spec)}


SlowHandler = Callable[[Handler], None]   # a handler is holding its isolate for a long time


class CodeBook(Protocol):
    """What a chain run asks its tier about code already shipped (Tier and AsyncTier both answer)."""

    def unsent(self, account_key: str, handlers: list[tuple[str, str]]) -> list[str]: ...

    def mark_shipped(self, account_key: str, handlers: list[tuple[str, str]]) -> None: ...


@dataclass
class Ask:
    """One request a chain run needs its tier to send (tier.request's arguments but the callbacks,
    which answer for the handlers of `by_id`)."""

    request: RunRequest
    by_id: dict[str, Handler]
    lane: bool
    silence: float


# A chain run without its I/O: yields each Ask, is sent the engine's reply to it (or thrown the
# EngineDown that request raised), returns the ChainResult. run_chain and async_chain drive it.
ChainSteps = Generator[Ask, RunResult, ChainResult]


def run_chain(tier: Tier, account_key: str, spec: HookSpec, handlers: list[Handler],
              context: JsonObject, *, host: HostFunction | None = None, hop: int = 0,
              budget_ms: int = DEFAULT_BUDGET_MS, trace_values: bool = False,
              on_slow: SlowHandler | None = None, cpu_ms: int = DEFAULT_CPU_MS) -> ChainResult:
    """`trace_values` adds each handler's resulting value to its trace entry (for try-runs);
    `on_slow` hears of a handler that keeps its isolate busy (its installation should move lanes)."""
    steps = chain_steps(tier, account_key, spec, handlers, context, hop=hop, budget_ms=budget_ms,
                        trace_values=trace_values, cpu_ms=cpu_ms)
    try:
        ask = next(steps)
        while True:
            try:
                reply = tier.request(account_key, ask.request, _on_host(ask.by_id, host), _on_slow(ask.by_id, on_slow),
                                     ask.lane, ask.silence)
            except EngineDown as down:
                ask = steps.throw(down)
                continue
            # The engine's answer, as decoded: the engine is ours, so its shape is taken as read.
            ask = steps.send(cast(RunResult, reply))
    except StopIteration as done:
        result: ChainResult = done.value
        return result


def chain_steps(tier: CodeBook, account_key: str, spec: HookSpec, handlers: list[Handler], context: JsonObject, *,
                hop: int = 0, budget_ms: int = DEFAULT_BUDGET_MS, trace_values: bool = False,
                cpu_ms: int = DEFAULT_CPU_MS) -> ChainSteps:
    """One hook's chain, fail-open: quarantined handlers skipped, the lane picked, a handler another
    call of the account holds left out, an engine lost mid-chain answered with the value unchanged
    (but for EngineUnavailable, which is raised: nothing ran)."""
    now = time.time()
    runnable = [h for h in handlers if not h.quarantined(now)]
    if not runnable:   # nothing (left) hooks this point: no engine needed
        return _finish(spec, context, dict(context), None, _skipped(spec, handlers, [], context, trace_values, now))
    held_back: list[HandlerTrace] = []
    while True:
        by_id = {h.installation_id: h for h in runnable}
        request: RunRequest = {"op": Op.RUN.value, "account": account_key, "hook": spec.name, "context": dict(context),
                   "budgetMs": budget_ms, "cpuMs": cpu_ms, "host": host_plan(spec, context, hop), "traceValues": trace_values,
                   "handlers": [{"id": h.installation_id, "hash": h.code_hash} for h in runnable]}
        lane = any(h.in_slow_lane(now) for h in runnable)
        try:
            reply = yield from _request(tier, account_key, request, by_id, lane, budget_ms)
        except EngineUnavailable:
            raise   # nothing ran: not a fail-open answer but "try again shortly" (the caller's to say)
        except EngineDown as down:
            return _finish(spec, context, dict(context), None, _skipped(spec, handlers, held_back + [
                HandlerTrace(h.installation_id, h.plugin, "error", False, 0.0,
                             f"the hook engine stopped while running this chain ({down.kind}); the value went on unchanged",
                             crash=down.kind) for h in runnable], context, trace_values, now))
        holder_id = reply.get("holder")
        if not holder_id:
            break
        # Another call of this account is stuck in that handler: leave it out rather than wait
        # behind it or run it a second time.
        holder = by_id[holder_id]
        runnable = [h for h in runnable if h is not holder]
        held_back.append(HandlerTrace(holder.installation_id, holder.plugin, "quarantined", False, 0.0,
                                      HELD_BACK_WARNING, value=spec.value_of(context) if trace_values else None))
        if not runnable:
            return _finish(spec, context, dict(context), None, _skipped(spec, handlers, held_back, context, trace_values, now))
    if "loadError" in reply:
        return _finish(spec, context, dict(context), None, _skipped(spec, handlers, held_back + [
            _load_failed(h, reply) for h in runnable], context, trace_values, now))
    trace = held_back + [_trace(spec, by_id[t["id"]], t, budget_ms) for t in reply["trace"]]
    cancellation = None
    if cancelled := reply.get("cancellation"):
        cancellation = _cancellation(runnable[cancelled["index"]], cancelled)
    return _finish(spec, context, reply["context"], cancellation, _skipped(spec, handlers, trace, context, trace_values, now))


def nothing_to_run(spec: HookSpec, handlers: list[Handler], context: JsonObject,
                   trace_values: bool = False) -> ChainResult:
    """The answer when no handler of `handlers` may run now (none given, or all quarantined): the value
    unchanged, without asking an engine."""
    return _finish(spec, context, dict(context), None, _skipped(spec, handlers, [], context, trace_values, time.time()))


def _request(tier: CodeBook, account_key: str, request: RunRequest, by_id: dict[str, Handler], lane: bool,
             budget_ms: int) -> Generator[Ask, RunResult, RunResult]:
    # The engine answers every handler within its budget (it closes an isolate that won't): this
    # is only the limit for an engine process that stopped answering altogether.
    silence = (budget_ms / 1000 + 1) * len(by_id) + 10
    # Code this process has not shipped yet goes with the request, saving the engine's "missing"
    # round trip on an account's first call; an engine that lost it (replaced) still asks.
    unsent = tier.unsent(account_key, [(h.installation_id, h.code_hash) for h in by_id.values()])
    if unsent:
        request["code"] = _code(by_id, unsent)
    reply = yield Ask(request, by_id, lane, silence)
    for _ in range(MISSING_TRIES):
        if "missing" not in reply:
            break
        # Every handler's code goes with the retry: the book of code shipped is per account, not per
        # engine, so with an account's chains in flight at once the retry may reach an engine that
        # lacks more than the first one said (issue 43's checks met this; one retry was not enough).
        request["code"] = _code(by_id, by_id)
        reply = yield Ask(request, by_id, lane, silence)
    if unsent:
        tier.mark_shipped(account_key, [(i, by_id[i].code_hash) for i in unsent])
    if reply.get("fatal"):
        raise EngineDown(CrashKind.CRASHED.value)
    return reply


def host_target(message: JsonObject, by_id: dict[str, Handler], available: bool) -> tuple[Handler, str, list[Any]] | JsonObject:
    """The handler, member and arguments of a HOST frame, or the answer refusing it."""
    handler_id = message.get("handler")
    handler = by_id.get(handler_id) if isinstance(handler_id, str) else None
    if handler is None or not available:
        return {"ok": False, "error": f"host.{message.get('member')} is not available here"}
    return handler, message["member"], message.get("args") or []


def host_failed(exc: Exception, member: str) -> JsonObject:
    """The answer to a host call whose member raised `exc`."""
    if isinstance(exc, HostError):
        return {"ok": False, "error": str(exc)}
    # A bug in a bridge must not take the chain down.
    return {"ok": False, "error": f"host.{member} failed: {type(exc).__name__}"}


def _on_host(by_id: dict[str, Handler], host: HostFunction | None) -> Callable[[JsonObject], JsonObject]:
    def on_host(message: JsonObject) -> JsonObject:
        target = host_target(message, by_id, host is not None)
        if isinstance(target, dict) or host is None:
            return cast(JsonObject, target)
        try:
            return {"ok": True, "value": host(*target)}
        except Exception as exc:  # noqa: BLE001 - answered to the plugin, never raised in the chain
            return host_failed(exc, target[1])
    return on_host


def _on_slow(by_id: dict[str, Handler], on_slow: SlowHandler | None) -> Callable[[str], None]:
    def slow(handler_id: str) -> None:
        if on_slow is not None and handler_id in by_id:
            on_slow(by_id[handler_id])
    return slow


def _load_failed(handler: Handler, reply: RunResult) -> HandlerTrace:
    warning = f"could not load: {explain(reply['loadError'])}"
    if reply.get("loadCulprit") != handler.installation_id:
        return HandlerTrace(handler.installation_id, handler.plugin, "error", False, 0.0, warning)
    # Its code cost the isolate: a wedge counts as a timeout (towards quarantine), as in a chain.
    crash = reply.get("loadCrash")
    status = "timeout" if crash == CrashKind.WEDGED.value else "error"
    return HandlerTrace(handler.installation_id, handler.plugin, status, False, 0.0, warning, crash=crash)


def _code(by_id: dict[str, Handler], ids: Iterable[str]) -> dict[str, JsonObject]:
    return {i: {"hash": by_id[i].code_hash, "code": by_id[i].code, "config": by_id[i].config} for i in ids}


def _skipped(spec: HookSpec, handlers: list[Handler], trace: list[HandlerTrace], context: JsonObject,
             trace_values: bool, now: float) -> list[HandlerTrace]:
    """The trace in chain order, with an entry for each quarantined handler that was skipped."""
    ran = {t.installation_id: t for t in trace}
    merged = []
    for h in handlers:
        if h.installation_id in ran:
            merged.append(ran[h.installation_id])
        elif h.quarantined(now):
            until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(h.quarantined_until))
            merged.append(HandlerTrace(h.installation_id, h.plugin, "quarantined", False, 0.0,
                                       QUARANTINE_WARNING.format(until=until),
                                       value=spec.value_of(context) if trace_values else None,
                                       quarantined_until=h.quarantined_until))
    return merged


def _finish(spec: HookSpec, original: JsonObject, current: JsonObject, cancellation: Cancellation | None,
            trace: list[HandlerTrace]) -> ChainResult:
    changed = spec.value_of(current) != spec.value_of(original)
    outcome = "cancelled" if cancellation else ("changed" if changed else "unchanged")
    return ChainResult(spec.name, outcome, current, spec.value_of(current), cancellation, trace)


def _trace(spec: HookSpec, handler: Handler, t: TraceEntry, budget_ms: int) -> HandlerTrace:
    logs = t.get("logs") or []
    if t.get("logsDropped"):
        logs = logs + [{"level": "warn", "message": f"{t['logsDropped']} more log lines dropped", "at": None}]
    value = spec.value_of(t["context"]) if "context" in t else None
    raw_warning, at = t.get("warning"), None
    warning = explain(raw_warning) if raw_warning else None
    if t["status"] in FAILED_STATUSES:   # rare: a map is read only for a handler that failed
        at = positions.locate(handler.code_hash, handler.code, spec.name, t["status"], t.get("at"))
        warning = positions.described(warning, at)
    held = float(t.get("hubHeldMs") or 0)
    if t["status"] != "timeout" or t.get("crash") or held < budget_ms * HUB_HELD_SHARE:
        held = 0.0
    elif warning:
        warning += HUB_HELD_WARNING.format(ms=held)
    return HandlerTrace(handler.installation_id, handler.plugin, t["status"], bool(t.get("changed")),
                        float(t.get("durationMs") or 0), warning or t.get("stateReset"), logs,
                        t.get("crash"), value=value, state_reset=t.get("stateReset"), at=at, hub_held_ms=held)


def _warning(t: TraceEntry) -> str | None:
    warning = t.get("warning")
    return explain(warning) if warning else t.get("stateReset")


def _cancellation(handler: Handler, data: JsonObject) -> Cancellation:
    return Cancellation(handler.installation_id, handler.plugin, data.get("reason") or "")

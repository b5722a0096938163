"""Runs one hook's chain for an account: plain data in, plain data out, fail-open throughout."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .hooks import HookSpec
from .pool import EngineCrashed, EnginePool

DEFAULT_BUDGET_MS = 5000
MAX_HOPS = 4

CRASH_WARNINGS = {
    "stuck": "never yielded within {budget} ms (its engine was replaced)",
    "memory": "exceeded the isolate's memory limit (its engine was replaced)",
    "crashed": "crashed its engine (the engine was replaced)",
}


@dataclass(frozen=True)
class Handler:
    """One installation's handler in a chain, with the compiled code the engine may need."""

    installation_id: str
    plugin: str
    code_hash: str
    code: str
    config: dict = field(default_factory=dict)
    granted: frozenset = frozenset()


@dataclass
class HandlerTrace:
    installation_id: str
    plugin: str
    status: str            # ran | cancelled | error | timeout | malformed
    changed: bool
    duration_ms: float
    warning: str | None = None
    logs: list = field(default_factory=list)
    engine_restarted: bool = False
    value: Any = None      # the hook's value after this handler; filled only when asked for


@dataclass
class Cancellation:
    installation_id: str
    plugin: str
    reason: str


@dataclass
class ChainResult:
    hook: str
    outcome: str           # unchanged | changed | cancelled
    context: dict
    value: Any
    cancellation: Cancellation | None
    trace: list[HandlerTrace]


HostFunction = Callable[[Handler, str, list], Any]   # raises HostError to reject the JS promise


class HostError(Exception):
    """A host member refused or failed; the message reaches the plugin as a rejected promise."""


def host_plan(spec: HookSpec, context: dict, hop: int = 0) -> dict:
    """Which optional host members this invocation gets (session, workspace, ssh)."""
    session = None
    if spec.session_field and hop <= MAX_HOPS:
        session = {
            "id": context.get(spec.session_field),
            "agentId": context.get(spec.agent_field) if spec.agent_field else None,
            "kind": context.get("sessionKind"),
        }
    return {"session": session, "workspace": spec.carries_agent, "ssh": spec.ssh}


def run_chain(pool: EnginePool, account_key: str, spec: HookSpec, handlers: list[Handler],
              context: dict, *, host: HostFunction | None = None, hop: int = 0,
              budget_ms: int = DEFAULT_BUDGET_MS, trace_values: bool = False) -> ChainResult:
    """`trace_values` adds each handler's resulting value to its trace entry (for try-runs)."""
    by_id = {h.installation_id: h for h in handlers}
    plan = host_plan(spec, context, hop)

    def on_host(message: dict) -> dict:
        handler = by_id.get(message.get("handler"))
        if handler is None or host is None:
            return {"ok": False, "error": f"host.{message.get('member')} is not available here"}
        try:
            return {"ok": True, "value": host(handler, message["member"], message.get("args") or [])}
        except HostError as exc:
            return {"ok": False, "error": str(exc)}
        except Exception as exc:  # a bug in a bridge must not take the chain down
            return {"ok": False, "error": f"host.{message['member']} failed: {type(exc).__name__}"}

    def attempt(engine, batch: list[Handler], current: dict) -> dict:
        request = {"op": "run", "account": account_key, "hook": spec.name, "context": current,
                   "budgetMs": budget_ms, "host": plan, "traceValues": trace_values,
                   "handlers": [{"id": h.installation_id, "hash": h.code_hash} for h in batch]}
        silence = (budget_ms / 1000) * len(batch) + 5
        reply = engine.request(request, on_host, silence)
        if "missing" in reply:
            request["code"] = {i: {"hash": by_id[i].code_hash, "code": by_id[i].code,
                                   "config": by_id[i].config} for i in reply["missing"]}
            reply = engine.request(request, on_host, silence)
        if "loadError" in reply:
            raise _LoadFailed(reply["loadError"])
        return reply

    if not handlers:   # nothing hooks this point: no engine needed
        return ChainResult(spec.name, "unchanged", dict(context), spec.value_of(context), None, [])
    trace: list[HandlerTrace] = []
    current = dict(context)
    cancellation = None
    suspect = any(pool.is_suspect(h.installation_id, h.code_hash) for h in handlers)
    with pool.engine_for(account_key) as engine:
        reply = None
        if not suspect:
            try:
                reply = attempt(engine, handlers, current)
            except (EngineCrashed, _LoadFailed):
                reply = None   # replay one handler at a time to find (and skip) the culprit
        if reply is not None:
            trace = [_trace(spec, by_id[t["id"]], t) for t in reply["trace"]]
            current = reply["context"]
            if reply.get("cancellation"):
                cancellation = _cancellation(handlers[reply["cancellation"]["index"]], reply["cancellation"])
        else:
            for h in handlers:
                try:
                    step = attempt(engine, [h], current)
                except EngineCrashed as crash:
                    pool.mark_suspect(h.installation_id, h.code_hash)
                    trace.append(HandlerTrace(
                        h.installation_id, h.plugin, "error" if crash.kind == "memory" else "timeout",
                        False, float(budget_ms) if crash.kind == "stuck" else 0.0,
                        CRASH_WARNINGS[crash.kind].format(budget=budget_ms), engine_restarted=True,
                        value=spec.value_of(current) if trace_values else None))
                    continue
                except _LoadFailed as failed:
                    trace.append(HandlerTrace(h.installation_id, h.plugin, "error", False, 0.0,
                                              f"could not load: {failed}",
                                              value=spec.value_of(current) if trace_values else None))
                    continue
                trace.extend(_trace(spec, by_id[t["id"]], t) for t in step["trace"])
                current = step["context"]
                if step.get("cancellation"):
                    cancellation = _cancellation(h, step["cancellation"])
                    break
    changed = spec.value_of(current) != spec.value_of(context)
    outcome = "cancelled" if cancellation else ("changed" if changed else "unchanged")
    return ChainResult(spec.name, outcome, current, spec.value_of(current), cancellation, trace)


class _LoadFailed(Exception):
    pass


def _trace(spec: HookSpec, handler: Handler, t: dict) -> HandlerTrace:
    logs = t.get("logs") or []
    if t.get("logsDropped"):
        logs = logs + [{"level": "warn", "message": f"{t['logsDropped']} more log lines dropped", "at": None}]
    value = spec.value_of(t["context"]) if "context" in t else None
    return HandlerTrace(handler.installation_id, handler.plugin, t["status"], bool(t.get("changed")),
                        float(t.get("durationMs") or 0), t.get("warning"), logs, value=value)


def _cancellation(handler: Handler, data: dict) -> Cancellation:
    return Cancellation(handler.installation_id, handler.plugin, data.get("reason") or "")

"""run_chain for asyncio: the same chain run (chain.py's chain_steps: quarantine, lanes, held-back
handlers, code shipping, fail-open) over an AsyncTier, with host calls answered by a coroutine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from plugins_app.runtime.config import DEFAULT_BUDGET_MS, DEFAULT_CPU_MS
from plugins_app.runtime.protocol import JsonObject, RunResult
from plugins_app.runtime.tables.hooks import HookSpec
from plugins_app.runtime.web.async_tier import AsyncHostHandler, AsyncSlowHandler, AsyncTier
from plugins_app.runtime.web.chain import ChainResult, Handler, chain_steps, host_failed, host_target
from plugins_app.runtime.web.tier import EngineDown

AsyncHostFunction = Callable[[Handler, str, list[Any]], Awaitable[Any]]   # raises HostError to reject the JS promise
AsyncSlowFunction = Callable[[Handler], Awaitable[None]]   # a handler is holding its isolate for a long time


async def run_chain_async(tier: AsyncTier, account_key: str, spec: HookSpec, handlers: list[Handler],
                          context: JsonObject, *, host: AsyncHostFunction | None = None, hop: int = 0,
                          budget_ms: int = DEFAULT_BUDGET_MS, trace_values: bool = False,
                          on_slow: AsyncSlowFunction | None = None, cpu_ms: int = DEFAULT_CPU_MS) -> ChainResult:
    """chain.run_chain's contract, awaited: raises EngineUnavailable when no engine took the chain."""
    steps = chain_steps(tier, account_key, spec, handlers, context, hop=hop, budget_ms=budget_ms,
                        trace_values=trace_values, cpu_ms=cpu_ms)
    try:
        ask = next(steps)
        while True:
            try:
                reply = await tier.request(account_key, ask.request, _on_host(ask.by_id, host),
                                           _on_slow(ask.by_id, on_slow), ask.lane, ask.silence)
            except EngineDown as down:
                ask = steps.throw(down)
                continue
            ask = steps.send(cast(RunResult, reply))
    except StopIteration as done:
        result: ChainResult = done.value
        return result


def _on_host(by_id: dict[str, Handler], host: AsyncHostFunction | None) -> AsyncHostHandler:
    async def on_host(message: JsonObject) -> JsonObject:
        target = host_target(message, by_id, host is not None)
        if isinstance(target, dict) or host is None:
            return cast(JsonObject, target)
        try:
            return {"ok": True, "value": await host(*target)}
        except Exception as exc:  # noqa: BLE001 - answered to the plugin, never raised in the chain
            return host_failed(exc, target[1])
    return on_host


def _on_slow(by_id: dict[str, Handler], on_slow: AsyncSlowFunction | None) -> AsyncSlowHandler:
    async def slow(handler_id: str) -> None:
        if on_slow is not None and handler_id in by_id:
            await on_slow(by_id[handler_id])
    return slow

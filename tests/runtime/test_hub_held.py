"""A handler's timeout that the hub made (its web process kept the handler's host calls: the admission
gate's queue, the loop's lag under overload) is not the plugin's: the trace says how long the hub kept
them and the entry counts towards no quarantine. One that awaited a slow service is still the plugin's.
Real engines; the hub's delay is the `waiting` context's return taking long, as a busy gate's would."""

import asyncio
import contextlib
import time

from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.async_chain import run_chain_async
from plugins_app.runtime.web.async_tier import AsyncTier, closing
from plugins_app.runtime.web.chain import HUB_HELD_SHARE, run_chain
from plugins_app.runtime.web.tier import Tier

from .conftest import PROMPT_CONTEXT

THREE_CALLS = ("globalThis.middleware.systemPrompt = async (c) => {"
             " await host.llm('a'); await host.llm('b'); await host.llm('c'); return c.systemPrompt + '!'; };")
BUDGET_MS = 900
HUB_DELAY_S = 0.5   # what the gate keeps a call each time it comes back from a wait
SERVICE_DELAY_S = 0.5


def test_the_hub_keeping_host_calls_is_not_charged_to_the_plugin_async(pool, make_handler):
    handler = make_handler(THREE_CALLS)

    def run(hub_delay, service_delay):
        @contextlib.asynccontextmanager
        async def waiting():
            yield
            await asyncio.sleep(hub_delay)   # back from the engine: the gate's queue

        async def host(h, member, args):
            await asyncio.sleep(service_delay)
            return "ok"

        async def main():
            async with closing(AsyncTier.like(pool, waiting=waiting)) as tier:
                return await run_chain_async(tier, f"acct-held-{hub_delay}", HOOKS["systemPrompt"], [handler],
                                             PROMPT_CONTEXT, host=host, budget_ms=BUDGET_MS)
        return asyncio.run(main()).trace[0]

    kept = run(HUB_DELAY_S, 0.0)
    assert kept.status == "timeout"
    assert kept.hub_held_ms >= HUB_DELAY_S * 1000 and not kept.misbehaved
    assert "not counted against it" in kept.warning
    slow = run(0.0, SERVICE_DELAY_S)
    assert slow.status == "timeout"
    assert slow.hub_held_ms == 0.0 and slow.misbehaved
    assert "not counted" not in slow.warning
    # A few milliseconds kept by the hub, under HUB_HELD_SHARE of the budget, excuse no slow service.
    both = run(BUDGET_MS * HUB_HELD_SHARE / 1000 / 4, SERVICE_DELAY_S)
    assert both.status == "timeout" and both.hub_held_ms == 0.0 and both.misbehaved


def test_the_hub_keeping_host_calls_is_not_charged_to_the_plugin_sync(pool, make_handler):
    handler = make_handler(THREE_CALLS)

    def run(hub_delay, service_delay):
        @contextlib.contextmanager
        def waiting():
            yield
            time.sleep(hub_delay)   # back from the engine or the host call: the gate's queue

        def host(h, member, args):
            time.sleep(service_delay)
            return "ok"

        tier = Tier(pool.engines, pool.lane, waiting=waiting, compilers=pool.compilers)
        try:
            return run_chain(tier, f"acct-held-sync-{hub_delay}", HOOKS["systemPrompt"], [handler],
                             PROMPT_CONTEXT, host=host, budget_ms=BUDGET_MS).trace[0]
        finally:
            tier.shutdown()

    kept = run(HUB_DELAY_S, 0.0)
    assert kept.status == "timeout"
    assert kept.hub_held_ms >= HUB_DELAY_S * 1000 and not kept.misbehaved
    slow = run(0.0, SERVICE_DELAY_S)
    assert slow.status == "timeout"
    assert slow.hub_held_ms == 0.0 and slow.misbehaved


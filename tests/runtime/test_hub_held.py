"""A handler's timeout that the hub made (its web process kept the handler's host calls: the admission
gate's queue, the loop's lag under overload) is not the plugin's: the trace says how long the hub kept
them and the entry counts towards no quarantine. One that awaited a slow service is still the plugin's.
Real engines; the hub's delay is the `waiting` context's return taking long, as a busy gate's would."""

import asyncio
import contextlib
import threading
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



# -- the engine's own line: a handler ready to go on while another chain holds the isolate's thread -----

QUICK_THEN_SLOW = ("globalThis.middleware.systemPrompt = async (c) => {"
                   " await host.llm('quick'); await host.llm('slow'); return c.systemPrompt + '!'; };")
COMPUTES_1200_MS = ("globalThis.middleware.systemPrompt = (c) => {"
                    " const end = Date.now() + 1200; while (Date.now() < end) {} return c.systemPrompt + '?'; };")


def test_a_reply_kept_waiting_for_the_isolates_thread_is_not_charged_to_the_plugin(one_engine, make_handler):
    # One engine, one isolate: the victim's quick reply arrives while another account's handler computes
    # for 1.2 s (within its own budgets), so the victim goes on only after its 900 ms budget has passed.
    # Its timeout is the engine's delay: the trace says so and no strike falls on it. Alone, the same
    # handler times out on the slow call only, and that one is its own.
    _, tier = one_engine
    victim, hog = make_handler(QUICK_THEN_SLOW), make_handler(COMPUTES_1200_MS)

    def run_victim(account, on_quick=None):
        def host(h, member, args):
            if args == ["quick"]:
                if on_quick is not None:
                    on_quick()
                return "ok"
            time.sleep(1.5)   # past the budget: a slow service
            return "late"
        return run_chain(tier, account, HOOKS["systemPrompt"], [victim], PROMPT_CONTEXT, host=host,
                         budget_ms=BUDGET_MS).trace[0]

    alone = run_victim("acct-line-alone")
    assert alone.status == "timeout" and alone.hub_held_ms == 0.0 and alone.misbehaved

    hog_results = []
    hog_thread = threading.Thread(target=lambda: hog_results.append(run_chain(
        tier, "acct-line-hog", HOOKS["systemPrompt"], [hog], PROMPT_CONTEXT, budget_ms=3000, cpu_ms=3000)))

    def start_the_hog():
        hog_thread.start()
        time.sleep(0.3)   # its turn holds the isolate's thread when the quick reply goes back

    kept = run_victim("acct-line-victim", on_quick=start_the_hog)
    hog_thread.join(30)
    assert [r.value for r in hog_results] == ["base?"]   # the other account's computation ran to its end
    assert kept.status == "timeout"
    assert kept.hub_held_ms >= 500 and not kept.misbehaved, kept
    assert "not counted against it" in kept.warning

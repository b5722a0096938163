"""Dropping an installation's compartment on every engine (issue 28, item 3): the memory its module
state held goes back to the system at once, and nobody else's state goes with it."""

import time

from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import Handler, run_chain

from ..conftest import PROMPT_CONTEXT

MIB = 1024 * 1024
HOARD_MIB = 1024   # the figure: a plugin holding 1 GiB
# Keeps HOARD_MIB of ArrayBuffers (off V8's heap) in its module state on its first call.
HOARDER = f"""const keep = [];
globalThis.middleware.systemPrompt = async (c) => {{
  if (keep.length === 0) for (let i = 0; i < {HOARD_MIB // 64}; i++) {{ const u = new Uint8Array(64 * 1024 * 1024); u.fill(7); keep.push(u); }}
  return c.systemPrompt;
}};"""
COUNTER = """let calls = 0;
globalThis.middleware.systemPrompt = async (c) => `${c.systemPrompt}:${++calls}`;"""


def handler(tier, source, n):
    compiled = tier.compile(source, "javascript")
    return Handler(str(n), f"plugin-{n}", f"hash-{n}", compiled["code"], {})


def rss(tier) -> int:
    return sum(tier.ping(address)["rssBytes"] for address in tier.addresses)


def run(tier, account, handlers):
    # Filling 1 GiB takes more than a second of CPU: the budget is raised, memory is what is at stake.
    return run_chain(tier, account, HOOKS["systemPrompt"], handlers, PROMPT_CONTEXT, cpu_ms=20_000, budget_ms=20_000)


def test_unloading_a_hoarder_gives_its_memory_back_within_seconds(one_engine):
    _, tier = one_engine
    hoarder = handler(tier, HOARDER, 1)
    before = rss(tier)
    assert run(tier, "hoarder", [hoarder]).trace[0].status == "ran"
    grown = rss(tier) - before
    assert grown > 0.9 * HOARD_MIB * MIB   # the memory is really held, off the V8 heap

    assert tier.unload("hoarder", ["1"]) == 1
    deadline = time.monotonic() + 10
    while rss(tier) - before > 0.2 * HOARD_MIB * MIB:   # at least 80 % of it back
        assert time.monotonic() < deadline, f"still {(rss(tier) - before) // MIB} MiB over after 10 s"
        time.sleep(0.2)
    assert tier.ping(tier.engines[0])["compartments"] == 0


def test_unloading_one_installation_keeps_everyone_elses_state(one_engine):
    _, tier = one_engine
    mine, neighbour, other_account = handler(tier, COUNTER, 1), handler(tier, COUNTER, 2), handler(tier, COUNTER, 3)
    for _ in range(2):
        run(tier, "acct-a", [mine, neighbour])
        run(tier, "acct-b", [other_account])
    assert tier.unload("acct-a", ["1"]) == 1
    assert run(tier, "acct-a", [mine, neighbour]).value == "base:1:3"   # mine starts afresh, its neighbour goes on
    assert run(tier, "acct-b", [other_account]).value == "base:3"


def test_unloading_what_no_engine_holds_drops_nothing(one_engine):
    _, tier = one_engine
    assert tier.unload("nobody", ["404"]) == 0

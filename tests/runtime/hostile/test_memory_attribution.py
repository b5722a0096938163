"""Memory is charged to the installation that keeps it, not to whoever allocates last (issue 28,
items 1, 2 and 6): a squatter's compartment is found, dropped and charged (a memory crash on its next
trace, which the web side strikes), while a victim that only allocates temporaries is never struck
and keeps its module state."""

import pytest

from plugins_app.runtime.engine.supervisor import Supervisor
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import Handler, run_chain
from plugins_app.runtime.web.tier import tier_for

from ..conftest import INBOUND_CONTEXT

MIB = 1024 * 1024
# Account A keeps 8 MiB of V8 heap per call (the squatter), at most 30 times: 240 of 256 MiB.
HEAP_SQUATTER = """const keep = [];
globalThis.middleware.userMessageInbound = async (c) => {
  if (keep.length < 30) keep.push(new Array(1024 * 1024).fill(0.5));
  return c.text;
};"""
# ... or 64 MiB outside the heap per call, without end.
OFF_HEAP_SQUATTER = """const keep = [];
globalThis.middleware.userMessageInbound = async (c) => {
  const u = new Uint8Array(64 * 1024 * 1024); u.fill(7); keep.push(u);
  return c.text;
};"""
# Account B allocates a 32 MiB temporary on every call and counts its calls in its module state.
VICTIM = """let calls = 0;
globalThis.middleware.userMessageInbound = async (c) => {
  const t = new Array(4 * 1024 * 1024).fill(1.5);
  return `${c.text} ${++calls} ${t.length}`;
};"""


@pytest.fixture
def engine(tmp_path):
    """One engine (no lane, so nobody moves away) with a 1 GiB process bound, and its tier."""
    supervisor = Supervisor(tmp_path / "engines", engines=1, lane=0, engine_memory_mb=1024).start()
    tier = tier_for(supervisor.describe())
    yield tier
    tier.shutdown()
    supervisor.stop()


def handler(tier, source, n):
    compiled = tier.compile(source, "javascript")
    assert not compiled["errors"], compiled["errors"]
    return Handler(str(n), f"plugin-{n}", f"hash-{n}", compiled["code"], {})


def call(tier, account, h):
    [entry] = run_chain(tier, account, HOOKS["userMessageInbound"], [h], INBOUND_CONTEXT).trace
    return entry


@pytest.mark.parametrize("squatter", [HEAP_SQUATTER, OFF_HEAP_SQUATTER], ids=["heap", "off-heap"])
def test_the_squatter_is_charged_and_the_victim_keeps_its_state(engine, squatter):
    a, b = handler(engine, squatter, 1), handler(engine, VICTIM, 2)
    squatter_trace, victim_trace = [], []
    for _ in range(40):
        squatter_trace.append(call(engine, "squatter", a))
        victim_trace.append(call(engine, "victim", b))
    # The victim: every call ran, with no warning, and its counter never went back.
    assert [(t.status, t.warning, t.crash) for t in victim_trace] == [("ran", None, None)] * 40
    assert run_chain(engine, "victim", HOOKS["userMessageInbound"], [b], INBOUND_CONTEXT).value \
        == f"hello 41 {4 * 1024 * 1024}"
    # The squatter: charged (a memory crash on its trace, which counts a strike) within 5 calls of
    # the engine first nearing a bound, and again each time it fills up again.
    charged = [i for i, t in enumerate(squatter_trace) if t.crash == "memory"]
    assert charged, [t.warning for t in squatter_trace]
    assert "MiB in its module state" in squatter_trace[charged[0]].warning
    status = engine.ping(engine.engines[0])
    assert status["memoryCharged"] >= 1
    assert status["rssBytes"] < 1.1 * 1024 * MIB   # never past the bound (+10 %)


def test_a_wedge_is_stopped_alone_and_a_victim_keeps_its_state(engine):
    # Issue 38: a handler that never yields is stopped in place (its turn terminated); the isolate,
    # and every other installation's module state in it, lives on.
    b = handler(engine, VICTIM, 2)
    wedge = handler(engine, "globalThis.middleware.userMessageInbound = async (c) => { await null; for (;;) {} };", 3)
    first = call(engine, "victim", b)
    assert first.state_reset is None
    replaced = engine.ping(engine.engines[0])["replaced"]
    lost = run_chain(engine, "wedger", HOOKS["userMessageInbound"], [wedge], INBOUND_CONTEXT, budget_ms=300)
    assert lost.trace[0].crash == "wedged" and "stopped" in lost.trace[0].warning
    after = call(engine, "victim", b)
    assert after.status == "ran" and after.crash is None and after.state_reset is None
    assert engine.ping(engine.engines[0])["replaced"] == replaced   # the isolate was kept
    # The victim's counter went on from where it was: its module state survived the wedge.
    assert int(run_chain(engine, "victim", HOOKS["userMessageInbound"], [b], INBOUND_CONTEXT).value.split()[1]) == 3


# Issue 39, item 4: 16 installations of one account keeping ~14 MiB each stay under the 16 MiB an
# installation alone is charged for; the account's sum (224 MiB) is what must be charged.
SPLIT_SQUATTER = """const keep = [];
globalThis.middleware.userMessageInbound = async (c) => {
  if (keep.length < 1) keep.push(new Array(1792 * 1024).fill(0.5));
  return c.text;
};"""
SPLIT = 16


def test_memory_split_over_many_installations_is_charged_to_the_account(engine):
    squatters = [handler(engine, SPLIT_SQUATTER, 100 + n) for n in range(SPLIT)]
    b = handler(engine, VICTIM, 2)
    squatter_trace, victim_trace = [], []
    for _ in range(3):
        for h in squatters:
            squatter_trace.append(call(engine, "splitter", h))
            victim_trace.append(call(engine, "victim", b))
    assert [(t.status, t.warning, t.crash) for t in victim_trace] == [("ran", None, None)] * len(victim_trace)
    charged = [t for t in squatter_trace if t.crash == "memory"]
    # Several of the account's installations were charged together, for what they kept between them.
    assert len(charged) >= 2, [t.warning for t in squatter_trace if t.warning]
    assert all("account's" in t.warning and "compartments kept" in t.warning for t in charged)
    assert not any(t.warning and "another installation held" in t.warning for t in squatter_trace)
    assert engine.ping(engine.engines[0])["memoryCharged"] >= 2

"""An account that keeps memory goes to the lane (issue 39, item 2's "a lane of its own"): once one of its
chains has kept KEEPER_BYTES past a full collection, a shared engine sends its calls to the lane for
a while, where its collections and reliefs hold up no other account. An account that only allocates
temporaries stays where it is, with its module state."""

from plugins_app.runtime.engine.memory import KEEPER_BYTES
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import run_chain

from ..conftest import INBOUND_CONTEXT

MIB = 1024 * 1024
# Keeps 24 MiB of V8 heap from its first call on (3 x 8 MiB arrays of doubles).
KEEPER = """const keep = [];
globalThis.middleware.userMessageInbound = async (c) => {
  while (keep.length < 3) keep.push(new Array(1024 * 1024).fill(0.5));
  return `${c.text} ${keep.length}`;
};"""
# Allocates a 32 MiB temporary on every call and counts its calls in its module state.
TEMPORARY = """let calls = 0;
globalThis.middleware.userMessageInbound = async (c) => {
  const t = new Array(4 * 1024 * 1024).fill(1.5);
  return `${c.text} ${++calls} ${t.length > 0}`;
};"""


def _accounts(tier, address):
    return tier.ping(address)["accounts"]


def test_an_account_that_keeps_memory_is_sent_to_the_lane_and_one_with_temporaries_stays(engine_and_lane, make_handler):
    _, tier = engine_and_lane
    assert 24 * MIB > KEEPER_BYTES
    [shared], [lane] = tier.engines, tier.lane
    keeper, temporary = make_handler(KEEPER), make_handler(TEMPORARY)
    spec = HOOKS["userMessageInbound"]

    first = run_chain(tier, "acct-keeper", spec, [keeper], INBOUND_CONTEXT)
    assert (first.trace[0].status, first.value) == ("ran", "hello 3")
    assert "acct-keeper" in _accounts(tier, shared) and "acct-keeper" not in _accounts(tier, lane)
    for n in range(1, 6):
        answer = run_chain(tier, "acct-temporary", spec, [temporary], INBOUND_CONTEXT)
        assert (answer.trace[0].status, answer.value) == ("ran", f"hello {n} true")

    again = run_chain(tier, "acct-keeper", spec, [keeper], INBOUND_CONTEXT)
    assert (again.trace[0].status, again.value) == ("ran", "hello 3")
    assert "acct-keeper" in _accounts(tier, lane)   # its second call ran there
    # The account with temporaries never moved: its counter went on in the same compartment.
    assert "acct-temporary" not in _accounts(tier, lane)
    assert run_chain(tier, "acct-temporary", spec, [temporary], INBOUND_CONTEXT).value == "hello 6 true"

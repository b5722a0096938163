"""Requests waiting in an engine's line never wait out another account's computation (issue 39): a
chain taking turn after turn lets newcomers go between its turns, and makes its engine busy so they go
to another engine; a turn holding the thread sends the waiting ones elsewhere."""

import threading
import time

import pytest

from plugins_app.runtime.engine.supervisor import Supervisor
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import run_chain
from plugins_app.runtime.web.tier import preferred_order, route, tier_for

from ..conftest import PROMPT_CONTEXT

# ~250 timers of 4 ms each: a second of CPU in short turns, none of which holds the thread long.
TIMERS = ("const busy = (ms) => { const end = Date.now() + ms; while (Date.now() < end) {} };"
          "globalThis.middleware.systemPrompt = async (c) => {"
          " await new Promise((resolve) => { let left = 250;"
          " for (let i = 0; i < 250; i++) setTimeout(() => { busy(4); if (--left === 0) resolve(); }, 0); });"
          " return c.systemPrompt + ':timers'; };")
APPEND = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '+';"


@pytest.fixture
def two_engines(tmp_path):
    supervisor = Supervisor(tmp_path / "engines", engines=2, lane=0).start()
    tier = tier_for(supervisor.describe())
    yield tier
    tier.shutdown()
    supervisor.stop()


def _attack(tier, handler, account):
    """Runs the attacker's chain on a thread; returns the thread and where its result lands."""
    result = {}
    thread = threading.Thread(target=lambda: result.update(
        r=run_chain(tier, account, HOOKS["systemPrompt"], [handler], PROMPT_CONTEXT, budget_ms=5000)))
    thread.start()
    return thread, result


def _wait_heavy(tier, engine):
    """Until the attacker's chain has computed past the heavy line and its engine says it is busy."""
    deadline = time.monotonic() + 20
    # Heavy, not only busy: on a loaded machine one slow turn makes an engine busy for a moment before
    # the chain has computed enough to count as heavy, and a newcomer then finds it free again.
    while not ((status := tier.ping(engine))["heavy"] and status["busy"]):
        assert time.monotonic() < deadline, status
        time.sleep(0.005)


def test_a_newcomer_takes_turns_between_a_chain_of_a_thousand_timers_on_the_only_engine(one_engine, make_handler):
    _, tier = one_engine
    attacker = make_handler(TIMERS)
    thread, attacked = _attack(tier, attacker, "timers")
    _wait_heavy(tier, tier.engines[0])
    victim = run_chain(tier, "victim", HOOKS["systemPrompt"], [make_handler(APPEND)], PROMPT_CONTEXT)
    still_running = thread.is_alive()
    thread.join(30)
    assert victim.value == "base+"
    # The victim was answered while the attacker's chain still had timers to fire: it took a turn
    # between them, instead of waiting in the line for the last one (as it did before).
    assert still_running
    assert attacked["r"].value == "base:timers"   # the attacker's own chain is not harmed either


def test_a_chain_taking_turn_after_turn_sends_newcomers_to_the_other_engine(two_engines, make_handler):
    tier = two_engines
    attacker, victim = make_handler(TIMERS), make_handler(APPEND)
    # A victim account that prefers the attacker's engine.
    attacked_engine = preferred_order(tier.engines, "timers")[0]
    account = next(a for a in (f"victim-{i}" for i in range(100)) if preferred_order(tier.engines, a)[0] == attacked_engine)
    other = next(e for e in tier.engines if e != attacked_engine)
    for engine in tier.engines:   # both up: the route passes over an engine still starting
        assert tier.ping(engine)["pong"]
    thread, _ = _attack(tier, attacker, "timers")
    _wait_heavy(tier, attacked_engine)
    answer = run_chain(tier, account, HOOKS["systemPrompt"], [victim], PROMPT_CONTEXT)
    still_running = thread.is_alive()
    thread.join(30)
    assert answer.value == "base+" and still_running
    assert account in tier.ping(other)["accounts"]
    assert account not in tier.ping(attacked_engine)["accounts"]


def test_when_every_engine_is_busy_a_call_waits_at_one_no_turn_holds():
    # The route's last resort is a wait in some engine's line: at the account's preferred engine,
    # unless a turn holds that one (a loop runs until HUB_CPU_MS stops it) and another is only busy.
    preferred, other = preferred_order(["a", "b"], "acct")
    plan = route(["a", "b"], [], "acct", {"op": "run"})
    assert next(plan)[0] == preferred
    assert plan.send({"busy": True, "held": True})[0] == other
    address, message = plan.send({"busy": True})
    assert (address, message["wait"]) == (other, True)

    plan = route(["a", "b"], [], "acct", {"op": "run"})
    next(plan)
    plan.send({"busy": True})
    assert plan.send({"busy": True}) == (preferred, {"op": "run", "wait": True})   # warm, and nothing holds it

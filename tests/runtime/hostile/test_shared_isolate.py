"""Many accounts in one engine's isolate: kept apart, reused across web processes, recovered."""

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from plugins_app.runtime.launch import PROJECT_ROOT
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import run_chain

from ..conftest import INBOUND_CONTEXT, PROMPT_CONTEXT

APPEND = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '+';"
WEDGE = "globalThis.middleware.systemPrompt = async (c) => { await null; while (true) {} };"


def test_accounts_in_one_isolate_see_neither_each_others_globals_nor_prototypes(one_engine, make_handler):
    _, tier = one_engine

    def chain(hook, handlers, context, account):
        return run_chain(tier, account, HOOKS[hook], handlers, context)

    writer = make_handler("globalThis.middleware.userMessageInbound = async (c) => {"
                          " globalThis.secret = c.text; try { Object.prototype.leak = c.text; } catch (e) {}"
                          " try { Array.prototype.push = () => 0; } catch (e) {} return c.text; };")
    reader = make_handler("globalThis.middleware.userMessageInbound = async (c) =>"
                          " [typeof globalThis.secret, typeof ({}).leak, [1].push(2)].join(',');")
    chain("userMessageInbound", [writer], dict(INBOUND_CONTEXT, text="A's value"), account="acct-a")
    seen = chain("userMessageInbound", [reader], INBOUND_CONTEXT, account="acct-b")
    assert seen.value == "undefined,undefined,2"
    assert {"acct-a", "acct-b"} <= set(tier.ping(tier.engines[0])["accounts"])   # one isolate held both


def test_the_same_installation_id_in_two_accounts_runs_each_accounts_own_code(pool):
    compiled = [pool.compile(f"globalThis.middleware.systemPrompt = async (c) => '{name}';", "javascript")["code"]
                for name in ("alpha", "beta")]
    from plugins_app.runtime.web.chain import Handler
    for account, code, expected in (("same-a", compiled[0], "alpha"), ("same-b", compiled[1], "beta")):
        handler = Handler("7", "p", "hash-7", code)   # equal ids and hashes on purpose
        result = run_chain(pool, account, HOOKS["systemPrompt"], [handler], PROMPT_CONTEXT)
        assert result.value == expected


def test_the_culprit_is_known_without_running_anything_twice(make_handler, chain):
    calls = []
    counter = make_handler("globalThis.middleware.systemPrompt = async (c) => {"
                           " await host.fetch('https://example.test/'); return c.systemPrompt + '1'; };")
    wedge = make_handler(WEDGE)

    def host(handler, member, args):
        calls.append(handler.installation_id)
        return {"status": 200, "headers": {}, "body": ""}

    result = chain("systemPrompt", [counter, wedge], PROMPT_CONTEXT, host=host, budget_ms=300)
    assert [t.status for t in result.trace] == ["ran", "timeout"]
    assert result.trace[1].crash == "wedged"
    assert calls == [counter.installation_id]   # the handler before the culprit ran once
    assert result.value == "base1"


def test_a_wedge_costs_no_other_account_its_compartment(one_engine, make_handler):
    # Issue 38: the wedged handler's turn is terminated alone; the isolate and every other account's
    # compartments in it stay (they used to be dropped with a closed isolate).
    supervisor, tier = one_engine
    good = make_handler(APPEND)
    accounts = [f"warm-{i}" for i in range(5)]
    for account in accounts:
        assert run_chain(tier, account, HOOKS["systemPrompt"], [good], PROMPT_CONTEXT).value == "base+"
    engine = tier.engines[0]
    assert set(accounts) <= set(tier.ping(engine)["accounts"])
    replaced = tier.ping(engine)["replaced"]
    wedged = run_chain(tier, "villain", HOOKS["systemPrompt"], [make_handler(WEDGE)], PROMPT_CONTEXT, budget_ms=300)
    assert wedged.trace[0].crash == "wedged"
    status = tier.ping(engine)
    assert status["replaced"] == replaced and set(accounts) <= set(status["accounts"])
    for account in accounts:
        assert run_chain(tier, account, HOOKS["systemPrompt"], [good], PROMPT_CONTEXT).value == "base+"
    assert supervisor.restarts() == 0   # the process itself was never replaced


def test_an_accounts_compartments_are_reused_by_another_web_process(one_engine, make_handler):
    supervisor, tier = one_engine
    good = make_handler(APPEND)
    run_chain(tier, "shared", HOOKS["systemPrompt"], [good], PROMPT_CONTEXT)
    (supervisor.directory / "tier.json").write_text(json.dumps(supervisor.describe()))
    # Another process asks for the chain without sending code: an engine that did not hold the
    # account's compartment would answer "missing".
    request = {"op": "run", "account": "shared", "hook": "systemPrompt", "context": PROMPT_CONTEXT,
               "budgetMs": 5000, "host": {"session": None, "workspace": False, "ssh": False},
               "handlers": [{"id": good.installation_id, "hash": good.code_hash}]}
    script = ("import json, sys; from plugins_app.runtime.web.tier import tier_from_directory;"
              f"print(json.dumps(tier_from_directory({str(supervisor.directory)!r}).request('shared', {request!r})))")
    out = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    reply = json.loads(out.stdout.strip().splitlines()[-1])
    assert "missing" not in reply and reply["context"]["systemPrompt"] == "base+"


def test_a_busy_engine_sends_another_account_elsewhere(make_handler, chain, pool):
    slow = make_handler("globalThis.middleware.systemPrompt = async (c) => {"
                        " const t = Date.now(); while (Date.now() - t < 1500) {} return c.systemPrompt; };")
    good = make_handler(APPEND)
    # Two accounts that prefer the same engine.
    preferred = pool.order("busy-a")[0]
    other = next(f"busy-b{i}" for i in range(100) if pool.order(f"busy-b{i}")[0] == preferred)
    chain("systemPrompt", [good], PROMPT_CONTEXT, account=other)
    hog = threading.Thread(target=chain, args=("systemPrompt", [slow], PROMPT_CONTEXT), kwargs={"account": "busy-a"})
    hog.start()
    deadline = time.monotonic() + 10
    # Past the 20 ms after which a running chain counts as keeping its engine busy.
    while not (status := pool.ping(preferred))["busy"] or status["running"] != "busy-a":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    second = pool.order(other)[1]
    assert other not in pool.ping(second)["accounts"]
    assert chain("systemPrompt", [good], PROMPT_CONTEXT, account=other).value == "base+"
    assert other in pool.ping(second)["accounts"]   # served there, not queued behind the hog
    hog.join(10)


def test_another_call_of_a_handler_holding_its_engine_skips_it_instead_of_waiting(engine_and_lane, make_handler):
    _, tier = engine_and_lane
    hog = make_handler("globalThis.middleware.systemPrompt = async (c) => {"
                       " const t = Date.now(); while (Date.now() - t < 4500) {} return c.systemPrompt + '!'; };")
    good = make_handler(APPEND)
    first = threading.Thread(target=run_chain, args=(tier, "hogger", HOOKS["systemPrompt"], [hog, good], PROMPT_CONTEXT))
    first.start()
    deadline = time.monotonic() + 10
    while tier.ping(tier.engines[0])["holding"] != hog.installation_id:   # held for over a second
        assert time.monotonic() < deadline
        time.sleep(0.05)
    engine_pid = tier.ping(tier.engines[0])["pid"]
    # The holding thread yields the CPU to everything else: nice 19, and preempted at once (SCHED_IDLE).
    assert (19, os.SCHED_IDLE) in _thread_priorities(engine_pid)
    second = run_chain(tier, "hogger", HOOKS["systemPrompt"], [hog, good], PROMPT_CONTEXT)
    first_still_running = first.is_alive()
    first.join(10)
    deadline = time.monotonic() + 10   # the engine gives it back right after answering
    while _thread_priorities(engine_pid) != {(0, os.SCHED_OTHER)}:   # ...its priority, once the chain is over
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert first_still_running   # the second call did not wait for the first to finish
    assert [t.status for t in second.trace] == ["quarantined", "ran"]
    assert "held its engine" in second.trace[0].warning
    assert second.value == "base+"


def _priority(stat: Path) -> tuple[int, int]:
    """A thread's (nice, scheduling policy): fields 19 and 41 of its stat."""
    fields = stat.read_text().rsplit(")", 1)[1].split()   # from field 3 on
    return int(fields[16]), int(fields[38])


def _thread_priorities(pid: int) -> set[tuple[int, int]]:
    return {_priority(task / "stat") for task in Path(f"/proc/{pid}/task").iterdir()}


def _thread_nices(pid: int) -> set[int]:
    return {nice for nice, _ in _thread_priorities(pid)}


def test_code_is_sent_with_a_first_call_and_asked_for_when_an_engine_lacks_it(one_engine, make_handler):
    _, tier = one_engine
    good = make_handler(APPEND)
    assert tier.unsent("shipper", [(good.installation_id, good.code_hash)]) == [good.installation_id]
    assert run_chain(tier, "shipper", HOOKS["systemPrompt"], [good], PROMPT_CONTEXT).value == "base+"
    assert tier.unsent("shipper", [(good.installation_id, good.code_hash)]) == []
    # This process believes the engine has the code, but the engine never saw it for this account:
    # the engine's "missing" answer brings it anyway.
    tier.mark_shipped("stranger", [(good.installation_id, good.code_hash)])
    assert run_chain(tier, "stranger", HOOKS["systemPrompt"], [good], PROMPT_CONTEXT).value == "base+"


def test_a_first_call_loads_its_compartments_before_starting_the_chain_once(one_engine, make_handler):
    _, tier = one_engine
    handlers = [make_handler(APPEND), make_handler(APPEND)]
    address = tier.engines[0]
    before = tier.ping(address)
    assert run_chain(tier, "newcomer", HOOKS["systemPrompt"], handlers, PROMPT_CONTEXT).value == "base++"
    after = tier.ping(address)
    # Not a start that answers "missing", then the load, then a second start.
    assert after["chainStarts"] - before["chainStarts"] == 1
    assert after["compartments"] - before["compartments"] == 2
    assert run_chain(tier, "newcomer", HOOKS["systemPrompt"], handlers, PROMPT_CONTEXT).value == "base++"
    assert tier.ping(address)["chainStarts"] - after["chainStarts"] == 1


def test_a_lane_engine_lowers_its_isolates_thread_but_not_the_thread_that_watches_budgets(engine_and_lane):
    _, tier = engine_and_lane
    lane_pid, engine_pid = tier.ping(tier.lane[0])["pid"], tier.ping(tier.engines[0])["pid"]
    assert _priority(Path(f"/proc/{lane_pid}/stat"))[0] == 0   # the main thread
    assert 10 in _thread_nices(lane_pid)        # its isolates' threads (the current one and the spare)
    assert _thread_nices(engine_pid) == {0}     # a shared engine lowers nothing


def test_a_warm_chain_is_followed_through_host_calls_and_wedges(one_engine, make_handler):
    _, tier = one_engine
    address = tier.engines[0]
    asks = make_handler("globalThis.middleware.systemPrompt = async (c) => {"
                        " if (c.systemPrompt === 'spin') { await null; while (true) {} }"
                        " const r = await host.fetch('https://example.test/'); return c.systemPrompt + r.status; };")
    host = lambda handler, member, args: {"status": 200, "headers": {}, "body": ""}
    run = lambda prompt: run_chain(tier, "arrival", HOOKS["systemPrompt"], [asks],
                                   dict(PROMPT_CONTEXT, systemPrompt=prompt), host=host, budget_ms=300)
    assert run("cold").value == "cold200"   # its code came with the call: loaded first
    before = tier.ping(address)
    # Warm: started at once, parked at its host call, and taken up again by the answer.
    assert run("warm").value == "warm200"
    after = tier.ping(address)
    assert after["chainStarts"] - before["chainStarts"] == 1
    # A chain that never yields after an await is stopped within its budget, in place.
    spun = run("spin")
    assert (spun.trace[0].status, spun.trace[0].crash, spun.value) == ("timeout", "wedged", "spin")
    assert tier.ping(address)["replaced"] == after["replaced"]
    assert run("again").value == "again200"


def test_a_chain_runs_out_even_if_its_caller_hangs_up(one_engine, make_handler):
    from plugins_app.runtime import wire
    from plugins_app.runtime.web.tier import EngineLink
    _, tier = one_engine
    address = tier.engines[0]
    slow = make_handler("globalThis.middleware.systemPrompt = async (c) => {"
                        " const t = Date.now(); while (Date.now() - t < 100) {} return 'the caller who left'; };")
    good = make_handler(APPEND)
    run_chain(tier, "leaver", HOOKS["systemPrompt"], [slow], PROMPT_CONTEXT)   # warm
    run_chain(tier, "stayer", HOOKS["systemPrompt"], [good], PROMPT_CONTEXT)
    before = idle_status(tier, address)["chainStarts"]
    link = EngineLink.connect(address)
    link.conn.send_bytes(wire.dumps({
        "op": "run", "id": 1, "account": "leaver", "hook": "systemPrompt", "context": PROMPT_CONTEXT,
        "budgetMs": 5000, "host": {"session": None, "workspace": False, "ssh": False},
        "handlers": [{"id": slow.installation_id, "hash": slow.code_hash}]}))
    link.close()   # gone while its chain runs
    # The next caller waits its turn and gets its own value, never the one left behind.
    assert run_chain(tier, "stayer", HOOKS["systemPrompt"], [good], PROMPT_CONTEXT).value == "base+"
    status = idle_status(tier, address)
    assert status["chainStarts"] == before + 2 and status["running"] is None and status["replaced"] == 0


def idle_status(tier, address: str) -> dict:
    """The engine's status once no chain is in flight or waiting on it. An answer can come from the
    isolate's thread a moment before the engine's loop has read it: the status is a snapshot."""
    deadline = time.monotonic() + 5
    while ((status := tier.ping(address))["running"] is not None or status["inFlight"] or status["queued"]) \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    return status


def test_a_call_sent_off_its_own_accounts_busy_engine_waits_there_when_the_lane_is_busy_too(engine_and_lane,
                                                                                          make_handler):
    _, tier = engine_and_lane
    busy_for = lambda ms: make_handler("globalThis.middleware.systemPrompt = async (c) => {"
                                       f" const t = Date.now(); while (Date.now() - t < {ms}) {{}}"
                                       " return c.systemPrompt + '+'; };")
    lane_hog = dataclasses.replace(busy_for(4000), slow_lane_until=time.time() + 600)   # runs in the lane
    own = busy_for(600)
    finished: dict[str, float] = {}

    def run(name, account, handler):
        # A CPU budget above the hog's 4 s of busy work: only its wall-clock time is at stake here.
        result = run_chain(tier, account, HOOKS["systemPrompt"], [handler], PROMPT_CONTEXT, cpu_ms=10_000)
        finished[name] = time.monotonic()
        return result

    def started(address):
        deadline = time.monotonic() + 10
        while not tier.ping(address)["busy"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)

    hog = threading.Thread(target=run, args=("lane hog", "someone-else", lane_hog))
    hog.start()
    started(tier.lane[0])
    first = threading.Thread(target=run, args=("first", "two-calls", own))
    first.start()
    started(tier.engines[0])
    # Its engine says busy with this account's own chain: the call is sent to the lane, finds the
    # lane busy with another account's, and waits behind its own account's chain instead.
    second = run("second", "two-calls", own)
    hog_running = hog.is_alive()
    first.join(10)
    hog.join(10)
    assert second.value == "base+" and [t.status for t in second.trace] == ["ran"]
    assert hog_running   # it did not wait for the lane's chain to end
    assert finished["first"] <= finished["second"] < finished["lane hog"]

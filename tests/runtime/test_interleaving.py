"""Many chains in flight on one isolate (issue 38): a chain parked at an await costs the engine nothing,
every rule still holds per invocation, and stopping one handler costs no other chain."""

import threading
import time

from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import run_chain

from .conftest import INBOUND_CONTEXT, PROMPT_CONTEXT

ECHO_AFTER_FETCH = ("globalThis.middleware.systemPrompt = async (c) => {"
                    " const r = await host.fetch(c.systemPrompt); return c.systemPrompt + ':' + (await r.text()); };")
SLOW_VETO = ("globalThis.middleware.userMessageInbound = async (c, tools) => {"
             " const r = await host.fetch('https://policy.test/'); return (await r.json()).ok ? c.text"
             " : tools.cancel('blocked ' + c.text); };")


def _in_parallel(calls):
    """Runs each call on a thread of its own; their results in order (an exception is re-raised)."""
    results = [None] * len(calls)

    def run(i, call):
        try:
            results[i] = call()
        except BaseException as exc:   # noqa: BLE001 - handed back to the test below
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def _wait_in_flight(tier, n):
    deadline = time.monotonic() + 20
    while (status := tier.ping(tier.engines[0]))["inFlight"] < n:
        assert time.monotonic() < deadline, status
        time.sleep(0.01)
    return status


def test_two_chains_whose_host_calls_answer_in_the_opposite_order_each_get_their_own_answer(one_engine, make_handler):
    _, tier = one_engine
    echo = make_handler(ECHO_AFTER_FETCH)
    release_first = threading.Event()
    finished = []

    def host(handler, member, args):
        if args[0] == "first":   # the first chain's call is answered only after the second chain ended
            assert release_first.wait(20)
        return {"status": 200, "headers": {}, "body": args[0].upper()}

    def call(prompt, account):
        result = run_chain(tier, account, HOOKS["systemPrompt"], [echo], dict(PROMPT_CONTEXT, systemPrompt=prompt),
                           host=host)
        finished.append(prompt)
        if prompt == "second":
            release_first.set()
        return result

    first_thread = threading.Thread(target=call, args=("first", "acct-a"))
    first_thread.start()
    _wait_in_flight(tier, 1)   # the first chain is parked at its host call on the one engine
    second = call("second", "acct-b")
    first_thread.join(30)
    assert second.value == "second:SECOND"
    assert finished[0] == "second"   # answered while the first was still parked on the same engine
    assert tier.ping(tier.engines[0])["replaced"] == 0


def test_chains_of_one_installation_interleave_and_keep_their_own_values(one_engine, make_handler):
    _, tier = one_engine
    echo = make_handler(ECHO_AFTER_FETCH)
    barrier = threading.Barrier(8)

    def host(handler, member, args):
        barrier.wait(20)   # every chain's call is out before any is answered: all 8 are parked at once
        return {"status": 200, "headers": {}, "body": args[0][::-1]}

    prompts = [f"p{i}" for i in range(8)]
    results = _in_parallel([lambda p=p: run_chain(tier, "same", HOOKS["systemPrompt"], [echo],
                                                  dict(PROMPT_CONTEXT, systemPrompt=p), host=host) for p in prompts])
    assert [r.value for r in results] == [f"{p}:{p[::-1]}" for p in prompts]


def test_twenty_parked_vetoes_of_five_accounts_answer_as_without_a_runaway_beside_them(one_engine, make_handler):
    _, tier = one_engine
    veto = make_handler(SLOW_VETO)
    runaway = make_handler("globalThis.middleware.userMessageInbound = async (c) => { await null; for (;;) {} };")
    gate = threading.Event()

    def host(handler, member, args):
        assert gate.wait(20)   # held until the runaway has been stopped
        return {"status": 200, "headers": {}, "body": '{"ok": false}'}

    def victim(i):
        return run_chain(tier, f"victim-{i % 5}", HOOKS["userMessageInbound"], [veto],
                         dict(INBOUND_CONTEXT, text=f"m{i}"), host=host)

    def attacker():
        _wait_in_flight(tier, 20)   # all twenty victims are parked on the engine first
        result = run_chain(tier, "attacker", HOOKS["userMessageInbound"], [runaway], INBOUND_CONTEXT, budget_ms=300)
        gate.set()
        return result

    replaced = tier.ping(tier.engines[0])["replaced"]
    *victims, attacked = _in_parallel([lambda i=i: victim(i) for i in range(20)] + [attacker])
    assert (attacked.trace[0].status, attacked.trace[0].crash) == ("timeout", "wedged")
    for i, result in enumerate(victims):   # each kept its own veto: nothing failed open
        assert result.cancellation is not None and result.cancellation.reason == f"blocked m{i}"
        assert [(t.status, t.crash, t.state_reset) for t in result.trace] == [("cancelled", None, None)]
    assert tier.ping(tier.engines[0])["replaced"] == replaced   # stopped in place: the isolate stayed


def test_timers_and_cancel_tokens_belong_to_their_own_invocation_while_chains_interleave(one_engine, make_handler):
    _, tier = one_engine
    # Each call waits on its own timer; a token made by one call and kept in module state is refused
    # when another call returns it.
    plugin = make_handler("""
let kept = null;
globalThis.middleware.userMessageInbound = async (c, tools) => {
  if (c.text === 'steal') { await new Promise((r) => setTimeout(r, 100)); return kept; }
  const mine = tools.cancel('mine ' + c.text);
  kept = mine;
  await new Promise((r) => setTimeout(r, c.text === 'slow' ? 600 : 50));
  return mine;
};""")
    slow, steal, fast = _in_parallel([
        lambda: run_chain(tier, "acct", HOOKS["userMessageInbound"], [plugin], dict(INBOUND_CONTEXT, text="slow")),
        lambda: (_wait_in_flight(tier, 1), run_chain(tier, "acct", HOOKS["userMessageInbound"], [plugin],
                                                     dict(INBOUND_CONTEXT, text="steal")))[1],
        lambda: (_wait_in_flight(tier, 1), run_chain(tier, "acct", HOOKS["userMessageInbound"], [plugin],
                                                     dict(INBOUND_CONTEXT, text="fast")))[1],
    ])
    assert slow.cancellation.reason == "mine slow" and fast.cancellation.reason == "mine fast"
    assert steal.cancellation is None and steal.trace[0].status == "malformed"


def test_cpu_is_charged_to_the_invocation_that_spent_it(one_engine, make_handler):
    _, tier = one_engine
    # Burns CPU in many short turns (a timer each), each well under the budget on its own.
    burner = make_handler("""
globalThis.middleware.systemPrompt = async (c) => {
  for (let i = 0; i < 400; i++) {
    const t = Date.now(); while (Date.now() - t < 10) {}
    await new Promise((r) => setTimeout(r, 0));
  }
  return c.systemPrompt + ' burnt';
};""")
    sleeper = make_handler("globalThis.middleware.systemPrompt = async (c) => {"
                           " await new Promise((r) => setTimeout(r, 800)); return c.systemPrompt + ' slept'; };")
    burnt, slept = _in_parallel([
        lambda: run_chain(tier, "burner", HOOKS["systemPrompt"], [burner], PROMPT_CONTEXT, cpu_ms=300),
        lambda: run_chain(tier, "sleeper", HOOKS["systemPrompt"], [sleeper], PROMPT_CONTEXT, cpu_ms=300),
    ])
    assert burnt.trace[0].status == "timeout" and "CPU" in burnt.trace[0].warning
    # Parked beside it the whole time, and charged none of its CPU.
    assert slept.trace[0].status == "ran" and slept.value == "base slept"


def test_a_chain_that_awaited_a_host_call_is_answered_from_the_isolates_thread(one_engine, make_handler):
    """Its host call goes out, and its finishing turn's answer, the moment each exists, on the
    isolate's thread: not after the engine's own loop has woken to read them (a round trip of the
    process's threads each)."""
    _, tier = one_engine
    echo = make_handler(ECHO_AFTER_FETCH)

    def host(handler, member, args):
        return {"status": 200, "headers": {}, "body": "fetched"}

    before = tier.ping(tier.engines[0])
    result = run_chain(tier, "acct-early-after-host", HOOKS["systemPrompt"], [echo],
                       dict(PROMPT_CONTEXT, systemPrompt="asked"), host=host)
    after = tier.ping(tier.engines[0])
    assert result.value == "asked:fetched"
    assert after["chainStarts"] - before["chainStarts"] == 1
    assert after["earlyAnswers"] - before["earlyAnswers"] == 1
    assert after["earlyHostCalls"] - before["earlyHostCalls"] == 1, (before, after)


def test_host_calls_sent_from_the_isolates_thread_keep_their_order_and_answers(one_engine, make_handler):
    """Three calls made at once (Promise.all) and two in a row: each gets its own answer, in the
    order the handler asked, whichever thread sent it."""
    _, tier = one_engine
    code = ("globalThis.middleware.systemPrompt = async (c) => {"
            " const all = await Promise.all(['a', 'b', 'c'].map(async (u) => (await host.fetch(u)).text()));"
            " const d = await (await host.fetch('d')).text(); const e = await (await host.fetch('e')).text();"
            " return [...all, d, e].join(','); };")
    asked = []

    def host(handler, member, args):
        asked.append(args[0])
        return {"status": 200, "headers": {}, "body": args[0].upper()}

    before = tier.ping(tier.engines[0])
    result = run_chain(tier, "acct-early-order", HOOKS["systemPrompt"], [make_handler(code)], PROMPT_CONTEXT,
                       host=host)
    after = tier.ping(tier.engines[0])
    assert (result.trace[0].status, result.value) == ("ran", "A,B,C,D,E")
    assert asked == ["a", "b", "c", "d", "e"]
    assert after["earlyHostCalls"] - before["earlyHostCalls"] == 5

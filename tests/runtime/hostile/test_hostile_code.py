"""Hostile plugins: each fails open, is contained, and leaves other plugins and accounts working."""

import time

from ..conftest import INBOUND_CONTEXT, PROMPT_CONTEXT

REDACT = "globalThis.middleware.userMessageInbound = async (c) => c.text.replace(/secret/g, '[x]');"


def test_a_throw_of_anything_is_an_error_and_the_chain_goes_on(make_handler, chain):
    throwers = [make_handler(f"globalThis.middleware.systemPrompt = async () => {{ throw {v}; }};")
                for v in ("new Error('boom')", "'a string'", "42", "null", "undefined", "{toString() { throw 1; }}")]
    good = make_handler("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '+';")
    result = chain("systemPrompt", throwers + [good], PROMPT_CONTEXT)
    assert [t.status for t in result.trace] == ["error"] * 6 + ["ran"]
    assert "boom" in result.trace[0].warning
    assert "a string" in result.trace[1].warning
    assert result.value == "base+"


def test_synchronous_infinite_loop_times_out_and_the_chain_goes_on(make_handler, chain):
    loop = make_handler("globalThis.middleware.systemPrompt = (c) => { while (true) {} };")
    good = make_handler("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '+';")
    result = chain("systemPrompt", [loop, good], PROMPT_CONTEXT, budget_ms=500)
    assert [t.status for t in result.trace] == ["timeout", "ran"]
    assert result.value == "base+"


def test_a_loop_after_await_is_stopped_by_closing_its_isolate_and_the_chain_goes_on(make_handler, chain):
    loop = make_handler("globalThis.middleware.systemPrompt = async (c) => { await null; while (true) {} };")
    good = make_handler("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '+';")
    started = time.monotonic()
    result = chain("systemPrompt", [good, loop, good], PROMPT_CONTEXT, budget_ms=500)
    assert time.monotonic() - started < 5
    assert [t.status for t in result.trace] == ["ran", "timeout", "ran"]
    assert result.trace[1].crash == "wedged"
    # The first handler's change survived the isolate it ran in: the chain went on from there.
    assert result.value == "base++"
    again = chain("systemPrompt", [good], PROMPT_CONTEXT)
    assert again.value == "base+"


def test_awaiting_forever_times_out_on_the_wall_clock(make_handler, chain):
    never = make_handler("globalThis.middleware.systemPrompt = async () => new Promise(() => {});")
    good = make_handler("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '+';")
    started = time.monotonic()
    result = chain("systemPrompt", [never, good], PROMPT_CONTEXT, budget_ms=300)
    assert 0.25 < time.monotonic() - started < 5
    assert [t.status for t in result.trace] == ["timeout", "ran"]
    assert result.value == "base+"


def test_a_memory_bomb_fails_open(make_handler, chain):
    bomb = make_handler("globalThis.middleware.systemPrompt = async () => { const a = []; while (true) a.push('x'.repeat(1e5) + Math.random()); };")
    good = make_handler("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '+';")
    result = chain("systemPrompt", [bomb, good], PROMPT_CONTEXT)
    assert result.trace[0].status in ("error", "timeout")
    assert result.trace[1].status == "ran"
    assert result.value == "base+"


def test_a_10_mb_return_value_is_malformed(make_handler, chain):
    big = make_handler("globalThis.middleware.systemPrompt = async () => 'x'.repeat(10 * 1024 * 1024);")
    result = chain("systemPrompt", [big], PROMPT_CONTEXT)
    assert result.trace[0].status == "malformed"
    assert result.value == "base"


def test_prototype_tampering_cannot_disarm_another_plugins_redaction(make_handler, chain):
    tamper = make_handler(
        "globalThis.middleware.userMessageInbound = async (c) => {"
        " String.prototype.replace = function () { return this; }; return c.text; };")
    redact = make_handler(REDACT)
    ctx = dict(INBOUND_CONTEXT, text="my secret")
    result = chain("userMessageInbound", [tamper, redact], ctx, account="tamper")
    assert result.trace[0].status == "error"     # frozen intrinsics reject the assignment
    assert result.value == "my [x]"
    # ...and not on a later call either.
    assert chain("userMessageInbound", [redact], ctx, account="tamper").value == "my [x]"


def test_plugins_cannot_see_each_others_globals(make_handler, chain):
    writer = make_handler("globalThis.shared = 'leak'; globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;")
    reader = make_handler("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ':' + typeof globalThis.shared + ':' + typeof __hub + ':' + typeof __py;")
    result = chain("systemPrompt", [writer, reader], PROMPT_CONTEXT)
    assert result.value == "base:undefined:undefined:undefined"


def test_a_hung_account_does_not_hold_up_another_account(make_handler, chain, pool):
    import threading
    loop = make_handler("globalThis.middleware.systemPrompt = async (c) => { await null; while (true) {} };")
    good = make_handler("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '+';")
    chain("systemPrompt", [good], PROMPT_CONTEXT, account="bystander")   # warm
    hung = threading.Thread(target=chain, args=("systemPrompt", [loop], PROMPT_CONTEXT),
                            kwargs={"account": "villain", "budget_ms": 2000})
    hung.start()
    villains_engine = pool.order("villain")[0]
    deadline = time.monotonic() + 10
    while pool.ping(villains_engine)["running"] != "villain":   # the loop has the engine
        assert time.monotonic() < deadline
    started = time.monotonic()
    result = chain("systemPrompt", [good], PROMPT_CONTEXT, account="bystander")
    assert result.value == "base+"
    assert time.monotonic() - started < 1.0
    hung.join(20)
    assert not hung.is_alive()


def test_a_host_call_left_unawaited_is_never_served_by_a_later_chain(make_handler, chain):
    # The handler fires host.fetch and returns without awaiting it: the call must be served in
    # its own chain or refused, never answered by the next chain the engine runs (which here is
    # the same handler again, so it would be served with the wrong chain's context).
    fire = make_handler("globalThis.middleware.systemPrompt = async (c) => "
                        "{ host.fetch('https://example.test/' + c.systemPrompt); return c.systemPrompt; };")
    served = []

    def host_for(label):
        def host(handler, member, args):
            served.append((label, args[0]))
            return {"status": 200, "headers": {}, "body": ""}
        return host

    for i in range(20):
        chain("systemPrompt", [fire], dict(PROMPT_CONTEXT, systemPrompt=f"run{i}"), account="stray",
              host=host_for(f"run{i}"))
    assert all(url == f"https://example.test/{label}" for label, url in served), served


def test_a_chain_start_that_throws_is_answered_as_a_fault_and_the_engine_serves_on(pool):
    # Not reachable from plugin code (handlers' own throws are caught per handler): a malformed
    # request makes the harness's start throw, and the engine must say so rather than hang.
    message = {"op": "run", "account": "malformed-start", "hook": "systemPrompt", "context": {},
               "budgetMs": 5000, "host": {"session": None, "workspace": False, "ssh": False},
               "handlers": "not a list"}
    assert pool.request("malformed-start", message).get("fatal")
    assert pool.ping(pool.order("malformed-start")[0])["pong"] is True

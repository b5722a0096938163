"""The asyncio tier (runtime/web/async_tier.py) against real engines: Tier's routing (busy -> the next
engine, the account's own chain -> the lane), its fault semantics (an unstarted request sent once more,
no listener -> EngineUnavailable, silence -> EngineSilent without killing the engine), host calls answered by
coroutines, concurrently, and connections pooled per event loop."""

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import threading
import time

import pytest
import uvloop

from plugins_app.runtime import wire
from plugins_app.runtime.engine.supervisor import Supervisor
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.async_chain import run_chain_async
from plugins_app.runtime.web.async_tier import AsyncEngineLink, AsyncFrames, AsyncTier, closing
from plugins_app.runtime.web.chain import HostError, run_chain
from plugins_app.runtime.web.tier import EngineDown, EngineSilent, EngineUnavailable, tier_for

from .conftest import PROMPT_CONTEXT

APPEND = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '!';"
VETO = "globalThis.middleware.userMessageInbound = async (c, tools) => tools.cancel('kept');"
SLOW_VETO = ("globalThis.middleware.userMessageInbound = async (c, tools) => {"
             " const t = Date.now(); while (Date.now() - t < 150) {} return tools.cancel('kept'); };")
SPIN = ("globalThis.middleware.systemPrompt = async (c) => {"
        " const t = Date.now(); while (Date.now() - t < 700) {} return c.systemPrompt + ' spun'; };")
INBOUND = {"sessionId": "1", "channelId": None, "text": "rm -rf /", "mediaIds": []}


async def until(condition, timeout=15.0, what="the condition"):
    """Polls `condition` (a coroutine function) until it is true."""
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, f"{what} never held"
        await asyncio.sleep(0.01)


def test_a_chain_runs_as_the_sync_tier_runs_it(pool, make_handler):
    handler = make_handler(APPEND)

    async def main():
        async with closing(AsyncTier.like(pool)) as tier:
            result = await run_chain_async(tier, "acct-async-same", HOOKS["systemPrompt"], [handler], PROMPT_CONTEXT)
            again = await run_chain_async(tier, "acct-async-same", HOOKS["systemPrompt"], [handler], PROMPT_CONTEXT)
            return result, again, tier.idle(tier.order("acct-async-same")[0])
    result, again, idle = asyncio.run(main())
    expected = run_chain(pool, "acct-async-same", HOOKS["systemPrompt"], [handler], PROMPT_CONTEXT)
    assert (result.outcome, result.value) == (again.outcome, again.value) == (expected.outcome, expected.value)
    assert [t.status for t in result.trace] == [t.status for t in expected.trace] == ["ran"]
    assert idle == 1   # one connection, taken and given back for each request in turn


def _same_preferred(tier, key):
    first = tier.order(key)[0]
    return next(k for k in (f"acct-async-{i}" for i in range(1000)) if k != key and tier.order(k)[0] == first)


def test_a_busy_engine_sends_the_next_account_to_the_next_engine(pool, make_handler):
    spin, append = make_handler(SPIN), make_handler(APPEND)

    async def main():
        async with closing(AsyncTier.like(pool)) as tier:
            holder = "acct-async-holder"
            other = _same_preferred(tier, holder)
            first, second = tier.order(holder)
            held = asyncio.create_task(run_chain_async(tier, holder, HOOKS["systemPrompt"], [spin], PROMPT_CONTEXT,
                                                       cpu_ms=5000))

            async def busy():
                status = await tier.ping(first)
                return status["running"] == holder and status["busy"]
            await until(busy, what="the spinning chain holding its engine")
            result = await run_chain_async(tier, other, HOOKS["systemPrompt"], [append], PROMPT_CONTEXT)
            was_held = not held.done()
            spun = await held
            return result, spun, was_held, await tier.ping(first), await tier.ping(second), other
    result, spun, was_held, first, second, other = asyncio.run(main())
    assert result.value == "base!" and spun.value == "base spun"
    assert was_held   # it did not wait behind the spinning chain...
    assert other in second["accounts"] and other not in first["accounts"]   # ...it ran on the next engine


def test_an_accounts_own_busy_chain_sends_its_next_call_to_the_lane(pool, make_handler):
    spin, append = make_handler(SPIN), make_handler(APPEND)

    async def main():
        async with closing(AsyncTier.like(pool)) as tier:
            account = "acct-async-lane"
            first = tier.order(account)[0]
            held = asyncio.create_task(run_chain_async(tier, account, HOOKS["systemPrompt"], [spin], PROMPT_CONTEXT,
                                                       cpu_ms=5000))

            async def busy():
                status = await tier.ping(first)
                return status["running"] == account and status["busy"]
            await until(busy, what="the spinning chain holding its engine")
            result = await run_chain_async(tier, account, HOOKS["systemPrompt"], [append], PROMPT_CONTEXT)
            await held
            shared = [await tier.ping(a) for a in tier.engines if a != first]
            return result, await tier.ping(tier.lane[0]), shared, account
    result, lane, shared, account = asyncio.run(main())
    assert result.value == "base!"
    assert account in lane["accounts"]   # the lane took it...
    assert all(account not in status["accounts"] for status in shared)   # ...not another shared engine


def test_host_calls_are_answered_by_coroutines_concurrently(pool, make_handler):
    # Two host calls awaited together are both in flight at once, and each gets its own answer
    # though they are answered in the opposite order.
    handler = make_handler("globalThis.middleware.systemPrompt = async (c) => {"
                           " const [a, b] = await Promise.all([host.llm('first'), host.llm('second')]);"
                           " return c.systemPrompt + ' ' + a + ' ' + b; };")

    async def main():
        in_flight, most = set(), [0]
        second_answered = asyncio.Event()

        async def host(h, member, args):
            in_flight.add(args[0])
            most[0] = max(most[0], len(in_flight))
            if args[0] == "first":
                await second_answered.wait()   # answers after the second
            else:
                second_answered.set()
            in_flight.discard(args[0])
            return args[0].upper()
        async with closing(AsyncTier.like(pool)) as tier:
            result = await run_chain_async(tier, "acct-async-host", HOOKS["systemPrompt"], [handler], PROMPT_CONTEXT,
                                           host=host)
        return result, most[0]
    result, most = asyncio.run(main())
    assert result.value == "base FIRST SECOND"
    assert most == 2


def test_a_host_error_rejects_the_promise_and_a_bug_is_named(pool, make_handler):
    handler = make_handler("globalThis.middleware.systemPrompt = async (c) => {"
                           " const out = [];"
                           " for (const p of ['refuse', 'bug']) { try { await host.llm(p); } catch (e) { out.push(e.message); } }"
                           " return out.join('|'); };")

    async def host(h, member, args):
        if args[0] == "refuse":
            raise HostError("host.llm: refused")
        raise KeyError("oops")

    async def main():
        async with closing(AsyncTier.like(pool)) as tier:
            return await run_chain_async(tier, "acct-async-err", HOOKS["systemPrompt"], [handler], PROMPT_CONTEXT,
                                         host=host)
    assert asyncio.run(main()).value == "host.llm: refused|host.llm failed: KeyError"


# -- faults ---------------------------------------------------------------------------------------

def wait_until_gone(pid):
    deadline = time.monotonic() + 15
    while os.path.exists(f"/proc/{pid}"):
        assert time.monotonic() < deadline, "the killed engine was never reaped"
        time.sleep(0.05)


def test_a_pooled_connection_to_a_dead_engine_is_replaced_before_use(one_engine, make_handler):
    _, sync_tier = one_engine
    veto = make_handler(VETO)

    async def main():
        async with closing(AsyncTier.like(sync_tier)) as tier:
            first = await run_chain_async(tier, "acct", HOOKS["userMessageInbound"], [veto], INBOUND)
            old_pid = (await tier.ping(tier.engines[0]))["pid"]
            os.kill(old_pid, signal.SIGKILL)
            await asyncio.to_thread(wait_until_gone, old_pid)
            again = await run_chain_async(tier, "acct", HOOKS["userMessageInbound"], [veto], INBOUND)
            return first, again, old_pid, (await tier.ping(tier.engines[0]))["pid"]
    first, again, old_pid, new_pid = asyncio.run(main())
    assert first.cancellation is not None
    assert again.cancellation is not None and again.cancellation.reason == "kept"   # ran, not failed open
    assert new_pid != old_pid


def test_calls_waiting_in_line_on_an_engine_that_dies_are_sent_again(one_engine, make_handler):
    # Only the chain running when the engine died may fail open; the ones queued behind it had not
    # started, and are sent once more on a fresh connection to its replacement.
    _, sync_tier = one_engine
    veto = make_handler(SLOW_VETO)
    run_chain(sync_tier, "acct", HOOKS["userMessageInbound"], [veto], INBOUND)   # warm: compiled and shipped

    async def main():
        async with closing(AsyncTier.like(sync_tier)) as tier:
            calls = [asyncio.create_task(run_chain_async(tier, "acct", HOOKS["userMessageInbound"], [veto], INBOUND))
                     for _ in range(6)]
            status = {}

            async def queued():
                status.update(await tier.ping(tier.engines[0]))
                return status["queued"] >= 3
            await until(queued, timeout=20, what="three calls waiting in line")
            os.kill(status["pid"], signal.SIGKILL)
            return await asyncio.wait_for(asyncio.gather(*calls), 60)
    results = asyncio.run(main())
    failed_open = [r for r in results if r.cancellation is None]
    assert all(r.trace[0].crash == "crashed" for r in failed_open), [r.trace[0].warning for r in failed_open]
    assert len(failed_open) <= 1, [r.trace[0].warning for r in failed_open]
    assert sum(r.cancellation is not None for r in results) >= 5


def test_with_no_supervisor_left_a_call_is_engine_unavailable(tmp_path, make_handler):
    supervisor = Supervisor(tmp_path / "engines", engines=1, lane=0).start()
    sync_tier = tier_for(supervisor.describe())
    supervisor.stop()
    handler = make_handler(APPEND)

    async def main():
        async with closing(AsyncTier.like(sync_tier, connect_timeout=2)) as tier:
            with pytest.raises(EngineUnavailable):
                await tier.ping(tier.engines[0])
            with pytest.raises(EngineUnavailable):
                await run_chain_async(tier, "acct", HOOKS["systemPrompt"], [handler], PROMPT_CONTEXT)
    asyncio.run(main())
    sync_tier.shutdown()


async def _link_over_pair():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setblocking(False)
    reader, writer = await asyncio.open_unix_connection(sock=ours)
    return AsyncEngineLink(AsyncFrames(reader, writer, ours)), wire.Frames(theirs.detach())


LOOPS = {"asyncio": asyncio.run, "uvloop": uvloop.run}   # an ASGI server may run either


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(("engine_reads", "says", "started"), [
    (False, None, False),        # died with the request unread: the connection is reset, nothing ran
    (True, None, True),          # read it (a chain started on arrival says nothing): it may have run
    (True, "queued", False),     # read it and put it in line: nothing ran
    (True, "started", True),     # queued, then started by the work loop
])
def test_what_a_dead_engine_had_done_with_a_request(engine_reads, says, started, loop):
    async def main():
        link, engine = await _link_over_pair()

        def die():
            if engine_reads:
                engine.recv_bytes()
            else:
                # Wait until the request is in the socket's buffer, unread, so closing resets.
                os.set_blocking(engine.fileno(), True)
                socket.socket(fileno=os.dup(engine.fileno())).recv(1, socket.MSG_PEEK)
            for op in {"queued": ["queued"], "started": ["queued", "started"]}.get(says, []):
                engine.send_bytes(wire.dumps({"op": op, "id": 1}))
            engine.close()   # as the kernel closes a killed engine's sockets

        dying = threading.Thread(target=die)
        dying.start()
        with pytest.raises(EngineDown) as down:
            await link.request({"op": "run"}, silence_limit=5)
        dying.join()
        return down.value
    down = LOOPS[loop](main())
    assert down.started is started and down.kind == "crashed"


def test_a_silent_engine_fails_the_request_as_silent_and_is_left_running():
    # The engine may be serving other chains: the web side never kills it, it only gives up on this request.
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        async def main():
            link, engine = await _link_over_pair()
            link.pid = sleeper.pid
            started = time.monotonic()
            with pytest.raises(EngineDown) as down:
                await link.request({"op": "run"}, silence_limit=0.3)
            waited = time.monotonic() - started
            engine.close()
            return down.value, waited, link.alive()
        down, waited, reusable = asyncio.run(main())
        # Silent, not wedged: a part's fault, which strikes no handler (issue 40). This "engine" never
        # read the request (its bytes are still in the socket), so it surely never started.
        assert isinstance(down, EngineSilent) and down.kind == "silent" and not down.started
        assert 0.3 <= waited < 5
        assert not reusable   # that connection is closed, never given back to the pool
        assert sleeper.poll() is None   # the "engine" still runs
    finally:
        sleeper.kill()
        sleeper.wait()


def test_silence_does_not_count_while_a_host_call_is_outstanding():
    # The sync link does not read while it answers a host call; neither does a slow host answer
    # here count as the engine's silence.
    async def main():
        link, engine = await _link_over_pair()

        def serve():
            request = wire.loads(engine.recv_bytes())
            engine.send_bytes(wire.dumps({"op": "host", "id": request["id"], "call": 1, "handler": "h",
                                          "member": "llm", "args": []}))
            reply = wire.loads(engine.recv_bytes())
            engine.send_bytes(wire.dumps({"op": "result", "id": request["id"], "got": reply["value"]}))

        async def slow_host(call):
            await asyncio.sleep(0.6)   # the host member's own wait, past the engine's silence limit
            return {"ok": True, "value": "late"}
        serving = threading.Thread(target=serve)
        serving.start()
        reply = await link.request({"op": "run"}, on_host=slow_host, silence_limit=0.2)
        serving.join()
        return reply, link.alive()
    reply, reusable = asyncio.run(main())
    assert reply["got"] == "late" and reusable


def test_a_cancelled_request_closes_its_connection():
    async def main():
        link, engine = await _link_over_pair()
        request = asyncio.create_task(link.request({"op": "run"}, silence_limit=30))
        await asyncio.to_thread(engine.recv_bytes)   # the engine has it
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        alive = link.alive()
        engine.close()
        return alive
    assert asyncio.run(main()) is False


def test_the_idle_pool_is_bounded(pool):
    async def main():
        async with closing(AsyncTier.like(pool, max_idle=2)) as tier:
            address = tier.engines[0]
            await asyncio.gather(*(tier.ping(address) for _ in range(5)))
            return tier.idle(address)
    assert asyncio.run(main()) == 2


@pytest.mark.parametrize("loop", LOOPS)
def test_uvloop_or_asyncio_the_pool_reuses_one_connection_and_waiting_wraps_each_wait(pool, make_handler, loop):
    handler = make_handler(APPEND)
    entered = []

    @contextlib.asynccontextmanager
    async def waiting():
        entered.append(1)
        yield

    async def main():
        async with closing(AsyncTier.like(pool, waiting=waiting)) as tier:
            for _ in range(3):
                result = await run_chain_async(tier, "acct-async-loop", HOOKS["systemPrompt"], [handler], PROMPT_CONTEXT)
                assert result.value == "base!"
            return tier.idle(tier.order("acct-async-loop")[0])
    assert LOOPS[loop](main()) == 1
    assert len(entered) >= 3   # the caller gave its place away at least once per call


@pytest.mark.parametrize("engine_reads", [True, False])
def test_a_request_larger_than_the_sockets_buffer(engine_reads):
    # Code being shipped makes a request of megabytes: written as the engine takes it, and an engine
    # that takes none of it fails the request as silent (nothing started) instead of holding it for ever.
    code = "x" * (4 * 1024 * 1024)

    async def main():
        link, engine = await _link_over_pair()

        def serve():
            request = wire.loads(engine.recv_bytes())
            engine.send_bytes(wire.dumps({"op": "result", "id": request["id"], "size": len(request["code"])}))
        if engine_reads:
            serving = threading.Thread(target=serve)
            serving.start()
            reply = await link.request({"op": "run", "code": code}, silence_limit=5)
            serving.join()
            engine.close()
            return reply
        with pytest.raises(EngineDown) as down:
            await link.request({"op": "run", "code": code}, silence_limit=0.3)
        engine.close()
        return down.value
    outcome = asyncio.run(main())
    if engine_reads:
        assert outcome["size"] == len(code)
    else:
        assert isinstance(outcome, EngineSilent) and not outcome.started

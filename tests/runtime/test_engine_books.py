"""An engine keeps the books of a chain that answered early without waking for them."""

import asyncio
import socket
import time
from multiprocessing.connection import Connection

from plugins_app.runtime import wire
from plugins_app.runtime.engine import process as engine_process
from plugins_app.runtime.engine.process import Engine
from plugins_app.runtime.engine.run import start_attempt
from plugins_app.runtime.protocol import DEFAULT_LIMITS, Job

from .conftest import PROMPT_CONTEXT

APPEND = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '+';"


def _answer(conn: Connection) -> dict:
    """The next frame that is not a notice that a request waits or starts (web/tier.py reads past those)."""
    while (message := wire.loads(conn.recv_bytes())).get("op") in ("queued", "started"):
        pass
    return message


def _code(handler) -> dict:
    return {handler.installation_id: {"hash": handler.code_hash, "code": handler.code, "config": {}}}


def _run(handler, n: int, account: str = "books", **extra) -> dict:
    return {"op": "run", "id": n, "account": account, "hook": "systemPrompt", "context": PROMPT_CONTEXT,
            "budgetMs": 5000, "host": {"session": None, "workspace": False, "ssh": False},
            "handlers": [{"id": handler.installation_id, "hash": handler.code_hash}], **extra}


def test_a_chain_answered_early_is_closed_by_the_next_arrival_or_else_by_its_timer(make_handler, monkeypatch):
    # Room to look before the timer fires, even on a loaded machine (0.5 s was seen to run out).
    monkeypatch.setattr(engine_process, "BUSY_SECONDS", 3.0)
    handler = make_handler(APPEND)
    code = _code(handler)
    run_message = lambda n, **extra: wire.dumps(_run(handler, n, **extra))

    async def body():
        engine = Engine(64, DEFAULT_LIMITS, spare=False)
        # The engine runs inside this test process, whose size the memory books read: what the first
        # (cold) chain grew it by could call for a recount, and a recount due keeps the next chain from
        # starting on arrival (3 runs in 6 on a loaded machine). Memory is not what this test is about.
        engine.memory.unchanged = lambda: True
        await engine.ready_isolate()
        work = asyncio.get_running_loop().create_task(engine.work())
        ours, theirs = socket.socketpair()
        engine.attach(wire.Frames(theirs.detach()))
        conn = Connection(ours.detach())
        ask = lambda message: asyncio.get_running_loop().run_in_executor(
            None, lambda: (conn.send_bytes(message), _answer(conn))[1])
        seen = {}
        try:
            assert (await ask(run_message(1, code=code)))["context"]["systemPrompt"] == "base+"   # cold: by the loop
            # Its answer may leave from the isolate's thread before the loop has kept its books: a call
            # arriving meanwhile finds the engine still running and queues instead of starting at once
            # (as it should; that is not what is tested here). Wait for the loop to finish.
            for _ in range(200):
                if engine.running is None:
                    break
                await asyncio.sleep(0.01)
            second = await ask(run_message(2))   # warm: started on arrival, answered early
            seen["pending"] = (engine.arrival_starts,
                               engine.running is not None and engine.isolate.queue.answered_early(), len(engine.jobs))
            for _ in range(200):   # the isolate's thread sends the answer a moment before it settles
                if engine.isolate.queue.settled_early():
                    break
                await asyncio.sleep(0.01)
            third = await ask(run_message(3))    # closes the second's books, then starts on arrival itself
            seen["third"] = (engine.arrival_starts, len(engine.jobs))
            for _ in range(200):                 # nothing arrives: the third's timer wakes the loop
                if engine.running is None:
                    break
                await asyncio.sleep(0.05)
            seen["timer"] = (engine.running, len(engine.jobs), engine.state)
            seen["values"] = [reply["context"]["systemPrompt"] for reply in (second, third)]
            await ask(run_message(4))   # settled early, its books pending...
            seen["status"] = (await ask(wire.dumps({"op": "ping", "id": 5})))["running"]   # ...kept for the status
            seen["after status"] = (engine.running, len(engine.jobs))
        finally:
            work.cancel()
            conn.close()
            await engine.isolate.close()
        return seen

    # The second chain answers from the isolate's thread only when it is done by the poll queued
    # behind its start; on a loaded machine it now and then is not (then the loop answers it, as it
    # should). What is tested needs that early answer, so the scenario is run again, a few times at most.
    for _ in range(5):
        seen = asyncio.run(body())
        if seen["pending"][1]:
            break
    assert seen["pending"] == (1, True, 1)    # answered (and known to be), and nothing woke the loop for its books
    assert seen["third"] == (2, 1)            # the second's books kept, the third's pending
    assert seen["timer"] == (None, 0, None)
    assert seen["values"] == ["base+", "base+"]
    assert (seen["status"], seen["after status"]) == (None, (None, 0))


def test_the_next_call_of_an_account_whose_chain_was_answered_early_waits_here_not_in_the_lane(make_handler,
                                                                                           monkeypatch):
    # The isolate's thread sends the answer before the loop keeps the chain's books; on a busy machine
    # the caller's next call can arrive first. Counted as the account's own chain holding this
    # engine, it went to the lane, and waited there behind whatever ran (a runaway: seconds).
    monkeypatch.setattr(engine_process, "BUSY_SECONDS", 0.0)   # any running chain counts as busy
    handler = make_handler(APPEND)

    async def body():
        engine = Engine(64, DEFAULT_LIMITS, spare=False)   # no work loop: nothing keeps the books
        iso = await engine.ready_isolate()
        engine.remember("same", _code(handler))
        assert await engine.load_missing(iso, "same", [handler.installation_id],
                                         {handler.installation_id: handler.code_hash}) == []
        ours, theirs = socket.socketpair()
        client = engine_process.Client(wire.Frames(theirs.detach()))
        conn = Connection(ours.detach())
        receive = lambda: asyncio.get_running_loop().run_in_executor(
            None, lambda: _answer(conn) if conn.poll(5) else None)
        seen = {}
        try:
            job = Job(client, _run(handler, 1, account="same"), started=time.monotonic() - 1)
            engine.running = job
            for moment in ("running", "answered"):
                if moment == "answered":   # the chain runs and the isolate's thread answers it
                    start_attempt(engine, iso, job, job.message["handlers"], PROMPT_CONTEXT, early=True)
                    assert (await receive())["context"]["systemPrompt"] == "base+"
                engine.jobs.clear()
                engine._admit(client, _run(handler, 2, account="same"))
                reply = await receive() if moment == "running" else None
                seen[moment] = ([queued.message["id"] for queued in engine.jobs], reply)
        finally:
            conn.close()
            client.conn.close()
            await iso.close()
        return seen

    seen = asyncio.run(body())
    queued, reply = seen["running"]   # still running: sent away, to the lane (the same account's chain)
    assert queued == [] and (reply["busy"], reply["lane"]) == (True, True)
    assert seen["answered"] == ([2], None)   # answered: queued here, to run once the books are kept

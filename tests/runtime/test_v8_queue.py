"""The engine's pipelined evaluations on mini-racer (v8_queue leans on its internals)."""

import asyncio
import multiprocessing

import pytest
from py_mini_racer import MiniRacer

from plugins_app.runtime.v8_queue import EvalQueue, IsolateStuck


async def _in_loop(body):
    # mini-racer binds an isolate to the event loop it was created on, as the engine does.
    mr = MiniRacer()
    try:
        return body(mr, EvalQueue(mr))
    finally:
        mr.close()


def run(body):
    return asyncio.run(_in_loop(body))


def test_answers_come_back_in_posting_order_and_unanswered_ones_are_skipped():
    def body(mr, q):
        q.post("var log = []; log.push('a'); 1")
        q.post("log.push('b'); 2", answered=False)
        q.post("log.push('c'); log.join()")
        return q.take(5), q.take(5)
    assert run(body) == (1, "a,b,c")


def test_the_value_read_after_a_dropped_start_sees_its_settled_microtasks():
    def body(mr, q):
        q.post("var box = {v: 'pending'}; (async () => { await null; await null; box.v = 'settled'; })(); 0",
               answered=False)
        q.post("box.v")
        return q.take(5)
    assert run(body) == "settled"


def test_a_synchronous_hog_is_cancelled_and_the_isolate_stays_usable():
    def body(mr, q):
        q.post("while (true) {}", answered=False)
        q.post("'never read'")
        with pytest.raises(asyncio.TimeoutError):
            q.take(0.3)
        q.post("6 * 7")
        return q.take(5)
    assert run(body) == 42


def test_an_isolate_wedged_after_an_await_is_reported_stuck():
    # The wedged isolate's thread never comes back (the engine process would be replaced), so
    # the case runs in a throwaway process that the pool terminates afterwards.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply_async(_wedge_an_isolate).get(30) == "stuck"


def _wedge_an_isolate() -> str:
    async def wedge():
        q = EvalQueue(MiniRacer())
        q.post("(async () => { await null; while (true) {} })(); 0", answered=False)
        q.post("'poll'")
        try:
            q.take(0.3)
        except IsolateStuck:
            return "stuck"
        return "answered"
    return asyncio.run(wedge())

"""The engine's pipelined evaluations on mini-racer (v8_queue leans on its internals)."""

import asyncio
import multiprocessing
import os
import threading
import time

import pytest
from py_mini_racer import MiniRacer

from plugins_app.runtime.v8_queue import Early, EvalQueue, IsolateStuck


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
        return q.take(5)[0], q.take(5)[0]
    assert run(body) == (1, "a,b,c")


def test_the_value_read_after_a_dropped_start_sees_its_settled_microtasks():
    def body(mr, q):
        q.post("var box = {v: 'pending'}; (async () => { await null; await null; box.v = 'settled'; })(); 0",
               answered=False)
        q.post("box.v")
        return q.take(5)[0]
    assert run(body) == "settled"


def test_a_synchronous_hog_is_cancelled_and_the_isolate_stays_usable():
    def body(mr, q):
        q.post("while (true) {}", answered=False)
        q.post("'never read'")
        with pytest.raises(asyncio.TimeoutError):
            q.take(0.3)
        q.post("6 * 7")
        return q.take(5)[0]
    assert run(body) == 42


def test_a_value_taken_early_is_handed_over_on_the_isolates_thread():
    # The engine answers its parent from inside `early`; the parent's next message (here: a byte
    # on a pipe) is what wakes the waiting thread, which then learns the value was dealt with.
    parent_r, parent_w = os.pipe()
    seen = []

    def answer_for(value):
        seen.append((value, threading.current_thread() is threading.main_thread()))
        return b"reply" if value.startswith("done") else None

    def send(answer):   # the parent reads the reply and sends its next request
        assert answer == b"reply"
        os.write(parent_w, b"next request")
    early = Early(answer_for, send, parent_r)

    def body(mr, q):
        q.post("'done: 1'", early=early)
        first = q.take(5)
        q.post("'not yet'", early=early)
        second = q.take(5)
        return first, second
    try:
        assert run(body) == (("done: 1", True), ("not yet", False))
    finally:
        os.close(parent_r)
        os.close(parent_w)
    assert seen == [("done: 1", False), ("not yet", False)]   # both ran off the main thread


def test_the_parents_next_message_always_finds_the_early_answer_queued():
    # The parent may answer before `send` even returns; the waiting thread wakes on that and must
    # find the item, not go back to sleep until its timeout (20 s here).
    parent_r, parent_w = os.pipe()

    def send(answer):
        os.write(parent_w, b"next request")
        time.sleep(0.5)   # the isolate's thread is slow to return; the parent is not

    def body(mr, q):
        started = time.monotonic()
        q.post("'done'", early=Early(lambda v: b"reply", send, parent_r))
        value = q.take(20)
        return value, time.monotonic() - started
    try:
        value, waited = run(body)
    finally:
        os.close(parent_r)
        os.close(parent_w)
    assert value == ("done", True)
    assert waited < 10   # woken by the parent's message, not by the 20 s timeout


def test_mini_racers_own_synchronous_calls_still_get_their_values():
    def body(mr, q):
        q.post("globalThis.double = (x) => x * 2; 0")
        q.take(5)
        return mr.eval("double")(21)   # a JS call from Python goes through the replaced queue
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

"""A handler that burns CPU gets its isolate thread the lowest nice value within a tenth of a
second, and only while it runs; one that waits keeps its priority."""

import os
import threading
import time
from pathlib import Path

from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import run_chain

from ..conftest import PROMPT_CONTEXT

BURN = ("globalThis.middleware.systemPrompt = async (c) => {"
        " const t = Date.now(); while (Date.now() - t < 700) {} return c.systemPrompt + ' burnt'; };")
SLEEP = ("globalThis.middleware.systemPrompt = async (c) => {"
         " await new Promise((r) => setTimeout(r, 700)); return c.systemPrompt + ' slept'; };")


def _priorities(pid: int) -> set[tuple[int, int]]:
    """Each thread's (nice, scheduling policy): fields 19 and 41 of its stat."""
    seen = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()   # from field 3 on
        except FileNotFoundError:   # a thread that ended meanwhile
            continue
        seen.add((int(fields[16]), int(fields[38])))
    return seen


def _while_running(tier, handler, account):
    """The engine's thread priorities, every sample from when the engine reports `handler`'s chain
    running until the chain answers, and after it ended."""
    engine = tier.engines[0]
    pid = tier.ping(engine)["pid"]
    results = []
    call = threading.Thread(target=lambda: results.append(
        run_chain(tier, account, HOOKS["systemPrompt"], [handler], PROMPT_CONTEXT)))
    call.start()
    deadline = time.monotonic() + 10
    # In flight on the engine (a computing chain also shows as "running": it holds the isolate's
    # thread; a waiting one is parked and holds nothing).
    while tier.ping(engine)["inFlight"] < 1:
        assert call.is_alive() and time.monotonic() < deadline, "the engine never reported the chain in flight"
        time.sleep(0.01)
    during: set[tuple[int, int]] = set()
    while call.is_alive():   # until the chain answers
        assert time.monotonic() < deadline, "the chain never answered"
        during |= _priorities(pid)
        time.sleep(0.01)
    deadline = time.monotonic() + 10   # the engine gives the priority back right after answering
    while (after := _priorities(pid)) != {(0, os.SCHED_OTHER)} and time.monotonic() < deadline:
        time.sleep(0.05)
    return results[0], during, after


def test_a_computing_handler_is_lowered_while_it_runs_and_restored_after(one_engine, make_handler):
    _, tier = one_engine
    result, during, after = _while_running(tier, make_handler(BURN), "burner")
    assert result.value == "base burnt" and result.trace[0].status == "ran"   # lowered, not stopped
    assert (19, os.SCHED_OTHER) in during   # nice 19, still in the normal class: it gets its turn
    assert after == {(0, os.SCHED_OTHER)}


def test_a_waiting_handler_keeps_its_priority(one_engine, make_handler):
    _, tier = one_engine
    result, during, _ = _while_running(tier, make_handler(SLEEP), "sleeper")
    assert result.value == "base slept"
    assert during == {(0, os.SCHED_OTHER)}

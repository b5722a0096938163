"""The compile engine's fair queue (runtime/engine/compile_queue.py): turns go round-robin across
accounts, an account keeps only a few compiles waiting, a wait past the deadline is answered busy,
and a waiter that gives up never takes the turn with it."""

import asyncio

import pytest

from plugins_app.runtime.engine.compile_queue import CompileBusy, FairQueue


async def _take(queue, account, order, release):
    async with queue.turn(account):
        order.append(account)
        await release.wait()


def test_turns_go_round_robin_across_accounts():
    async def scenario():
        queue, order, release = FairQueue(max_waiting=5, deadline=30), [], asyncio.Event()
        tasks = [asyncio.create_task(_take(queue, a, order, release)) for a in ["t", "t", "t", "t", "v", "w"]]
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*tasks)
        return order
    # The tenant's first turn was running; its other three wait behind one turn each of the others.
    assert asyncio.run(scenario()) == ["t", "t", "v", "w", "t", "t"]


def test_an_account_with_enough_waiting_is_refused_at_once_and_others_are_not():
    async def scenario():
        queue, order, release = FairQueue(max_waiting=2, deadline=30), [], asyncio.Event()
        tasks = [asyncio.create_task(_take(queue, "t", order, release)) for _ in range(5)]
        victim = asyncio.create_task(_take(queue, "v", order, release))
        await asyncio.sleep(0)
        release.set()
        results = await asyncio.gather(*tasks, victim, return_exceptions=True)
        return results, order, queue
    results, order, queue = asyncio.run(scenario())
    refused = [r for r in results if isinstance(r, CompileBusy)]
    assert [r.kind for r in refused] == ["account", "account"]
    assert "already has 2 plugin compiles waiting" in str(refused[0])
    assert order == ["t", "t", "v", "t"] and queue.refused["account"] == 2
    assert not queue.busy and queue.waiting() == 0


def test_a_wait_past_the_deadline_is_busy_and_the_turn_goes_on():
    async def scenario():
        queue, order, release = FairQueue(max_waiting=5, deadline=0.05), [], asyncio.Event()
        holder = asyncio.create_task(_take(queue, "t", order, release))
        await asyncio.sleep(0)
        with pytest.raises(CompileBusy) as busy:
            await _take(queue, "v", order, release)
        release.set()
        await holder
        await _take(queue, "v", order, release)   # the queue is free again
        return busy.value, order, queue
    busy, order, queue = asyncio.run(scenario())
    assert busy.kind == "deadline" and busy.reply()["retryAfter"] > 0
    assert order == ["t", "v"] and not queue.busy


def test_a_cancelled_waiter_does_not_keep_the_turn():
    async def scenario():
        queue, order, release = FairQueue(max_waiting=5, deadline=30), [], asyncio.Event()
        holder = asyncio.create_task(_take(queue, "t", order, release))
        await asyncio.sleep(0)
        gone = asyncio.create_task(_take(queue, "g", order, release))
        after = asyncio.create_task(_take(queue, "v", order, release))
        await asyncio.sleep(0)
        gone.cancel()
        release.set()
        await asyncio.gather(holder, after, gone, return_exceptions=True)
        return order, queue
    order, queue = asyncio.run(scenario())
    assert order == ["t", "v"] and not queue.busy

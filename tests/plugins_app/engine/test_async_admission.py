"""The async execute path's admission: the same turns as FairGate, as futures on one event loop, and the
machine's places taken through a description per call (one thread runs every call)."""

import asyncio
import contextvars

from plugins_app.services.engine.async_admission import POLL_MAX_S, AsyncFairGate
from plugins_app.services.engine.machine_places import MachinePlaces


async def until(condition, what: str) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0)
    assert condition(), what


async def caller(gate: AsyncFairGate, key, admitted: list) -> None:
    async with gate.turn(key):
        admitted.append(key)


def call_task(coroutine) -> asyncio.Task:
    """A task of its own, as each request is: not one spawned inside a turn (that would share it)."""
    return asyncio.create_task(coroutine, context=contextvars.Context())


async def queue(gate: AsyncFairGate, key, admitted: list) -> asyncio.Task:
    before = gate.queued()
    task = call_task(caller(gate, key, admitted))
    await until(lambda: gate.queued() == before + 1, f"{key} to queue")
    return task


def test_a_freed_place_goes_to_the_next_account_not_the_next_caller():
    async def main():
        gate, admitted = AsyncFairGate(1), []
        async with gate.turn("holder"):
            tasks = [await queue(gate, key, admitted) for key in ("noisy", "noisy", "noisy", "quiet")]
        await asyncio.gather(*tasks)
        return admitted
    assert asyncio.run(main()) == ["noisy", "quiet", "noisy", "noisy"]


def test_an_account_at_its_share_waits_while_another_account_takes_the_free_place():
    async def main():
        gate, admitted = AsyncFairGate(2, per_account=1), []
        async with gate.turn("noisy"):
            second = await queue(gate, "noisy", admitted)
            await call_task(caller(gate, "quiet", admitted))   # at once: a place is free for it
            assert admitted == ["quiet"] and gate.queued() == 1
        await second
        return admitted
    assert asyncio.run(main()) == ["quiet", "noisy"]


def test_a_call_waiting_elsewhere_lets_others_in_and_comes_back_before_new_callers():
    async def main():
        gate, order = AsyncFairGate(1, per_account=1), []
        gave_away, answer = asyncio.Event(), asyncio.Event()

        async def waiting_call():
            async with gate.turn("slow"):
                async with gate.waiting():
                    gave_away.set()
                    await answer.wait()
                order.append("slow")

        slow = call_task(waiting_call())
        await gave_away.wait()
        async def next_call():   # the same account's next call: its place was given away
            async with gate.turn("slow"):
                order.append("slow's next")
                answer.set()
                await until(lambda: gate.queued() == 1, "the slow call to ask for its place back")
                return await queue(gate, "late", order)

        late = await call_task(next_call())
        await asyncio.gather(slow, late)
        return order
    assert asyncio.run(main()) == ["slow's next", "slow", "late"]


def test_a_caller_that_goes_away_while_it_waits_leaves_no_place_taken():
    async def main():
        gate, admitted = AsyncFairGate(1), []
        async with gate.turn("a"):
            gone = await queue(gate, "b", admitted)
            gone.cancel()
            await asyncio.gather(gone, return_exceptions=True)
            assert gate.queued() == 0
        await call_task(caller(gate, "c", admitted))
        return admitted, gate.books.running
    assert asyncio.run(main()) == (["c"], 0)


def test_an_accounts_machine_place_is_held_per_call_though_one_thread_runs_them(tmp_path):
    """Two calls of one account on one loop: the second waits for the first's machine place (one
    description per call: a single thread's would hold the lock for both), and takes it once given back."""
    async def main():
        machine = MachinePlaces(tmp_path / "admission.lock", capacity=1)
        gate, order = AsyncFairGate(per_account=2, machine=machine), []
        first_in, first_out = asyncio.Event(), asyncio.Event()

        async def first():
            async with gate.turn(("account", 7)):
                order.append("first")
                first_in.set()
                await first_out.wait()

        async def second():
            await first_in.wait()
            async with gate.turn(("account", 7)):
                order.append("second")

        tasks = [call_task(first()), call_task(second())]
        await until(lambda: gate.books.running == 2, "the second call to reach the machine's place")
        await asyncio.sleep(3 * POLL_MAX_S)   # three of its tries at the lock: none gets it
        assert order == ["first"]
        first_out.set()
        await asyncio.gather(*tasks)
        return order
    assert asyncio.run(main()) == ["first", "second"]

"""Load shedding (issue 40, item 6): a call that cannot start within the queue deadline is refused at once,
by the one policy both gates keep (admission_policy.FairBooks), in proportion to its account's excess."""

import asyncio
import threading
import time

import pytest

from plugins_app.services.engine.admission import FairGate
from plugins_app.services.engine.admission_policy import FairBooks, Shed, Waiter, _Pace
from plugins_app.services.engine.async_admission import AsyncFairGate

from .test_admission import Caller
from .test_async_admission import call_task, caller, until


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_backlogged_account_past_its_pace_is_refused_on_arrival_and_a_quiet_one_is_not():
    clock = Clock()
    books: FairBooks[str] = FairBooks(1, per_account=1, shed_after=1.0, clock=clock)
    assert books.enter_now("holder", False)
    for i in range(6):   # the noisy account's backlog, then one quiet call
        books.queue(Waiter("noisy", f"noisy-{i}", False, books.deadline_for(clock.now), clock.now))
    books.queue(Waiter("quiet", "quiet-0", False, books.deadline_for(clock.now), clock.now))
    granted, holder = [], "holder"
    for _ in range(4):   # each turn takes 0.3 s
        clock.now += 0.3
        (woken,) = books.release(holder)
        granted.append(woken.wake)
        holder = woken.key
    # Turns go round: the quiet call is served in the first round, however long the noisy backlog.
    assert granted == ["noisy-0", "quiet-0", "noisy-1", "noisy-2"]
    # The noisy account has 3 calls ahead and a turn about every 0.3-0.6 s: a fourth cannot start in 1 s.
    refused = books.refuse_on_arrival("noisy")
    assert isinstance(refused, Shed) and "queued ahead" in refused.reason
    # An account with nothing queued is never refused on arrival: it waits one round at most.
    assert books.refuse_on_arrival("quiet") is None
    assert books.refuse_on_arrival("newcomer") is None


def test_without_a_deadline_nothing_is_ever_refused():
    clock = Clock()
    books: FairBooks[str] = FairBooks(1, per_account=1, shed_after=0.0, clock=clock)
    books.enter_now("holder", False)
    waiter = Waiter("noisy", "n", False, books.deadline_for(clock.now), clock.now)
    books.queue(waiter)
    assert waiter.deadline == float("inf")
    assert books.refuse_on_arrival("noisy") is None


def test_a_forgotten_waiter_leaves_no_trace_and_one_granted_meanwhile_is_not_forgotten():
    books: FairBooks[str] = FairBooks(1, per_account=1, shed_after=1.0)
    books.enter_now("holder", False)
    first, second = Waiter("a", "1", False), Waiter("b", "2", False)
    books.queue(first)
    books.queue(second)
    assert books.forget(first) and books.queued() == 1 and "a" not in books.waiting
    assert [w.wake for w in books.release("holder")] == ["2"]
    assert not books.forget(second)   # it holds its place now: it must use or release it
    assert books.running == 1 and books.held == {"b": 1}


def test_the_thread_gate_sheds_a_call_that_cannot_start_in_time_and_serves_the_next():
    shed: list[Shed] = []
    gate = FairGate(1, per_account=1, shed_after=0.05, on_shed=shed.append)
    outcome: list[str] = []

    def late_call():
        try:
            with gate.turn("noisy"):
                outcome.append("ran")
        except Shed as exc:
            outcome.append(f"shed after {exc.deadline:g}")

    with gate.turn("holder"):   # held past the waiting call's deadline
        thread = threading.Thread(target=late_call, daemon=True)
        thread.start()
        thread.join(10)
        assert outcome == ["shed after 0.05"] and len(shed) == 1
        assert gate.queued() == 0
    admitted: list = []
    Caller(gate, "noisy", admitted).run()   # the books are clean: the next call goes in at once
    assert admitted == ["noisy"] and gate.books.running == 0 and gate.books.held == {}


def test_a_call_coming_back_from_its_engine_is_never_shed():
    gate = FairGate(1, per_account=1, shed_after=0.01)
    order: list[str] = []
    gave_away, answered = threading.Event(), threading.Event()

    def waiting_call():
        with gate.turn("slow"):
            with gate.waiting():
                gave_away.set()
                answered.wait(10)
            order.append("slow finished")

    thread = threading.Thread(target=waiting_call, daemon=True)
    thread.start()
    gave_away.wait(10)
    with gate.turn("quick"):
        answered.set()
        # The returning call waits past its deadline for the place 'quick' holds, and still finishes.
        thread.join(0.1)
        order.append("quick")
    thread.join(10)
    assert order == ["quick", "slow finished"]


def test_the_event_loop_gate_sheds_at_the_deadline_and_keeps_its_books_clean():
    async def main():
        shed: list[Shed] = []
        gate = AsyncFairGate(1, per_account=1, shed_after=0.05, on_shed=shed.append)
        admitted: list = []
        async with gate.turn("holder"):
            task = call_task(caller(gate, "noisy", admitted))
            with pytest.raises(Shed):
                await task
            assert gate.queued() == 0 and len(shed) == 1
        await call_task(caller(gate, "noisy", admitted))
        await until(lambda: gate.books.running == 0, "the place to be free")
        return admitted, gate.books.held
    assert asyncio.run(main()) == (["noisy"], {})


def test_the_event_loop_gate_refuses_on_arrival_past_the_accounts_pace():
    async def main():
        gate = AsyncFairGate(1, per_account=1, shed_after=10.0)
        admitted: list = []
        async with gate.turn("holder"):
            tasks = [call_task(caller(gate, "noisy", admitted)) for _ in range(2)]
            await until(lambda: gate.queued() == 2, "the backlog to queue")
            gate.books._pace["noisy"] = _Pace(gate.books.clock(), interval=20.0)   # a turn every 20 s
            with pytest.raises(Shed) as refused:
                await call_task(caller(gate, "noisy", admitted))
            assert gate.queued() == 2 and "queued ahead" in refused.value.reason   # refused at once, never queued
        await asyncio.gather(*tasks)
        return admitted
    assert asyncio.run(main()) == ["noisy"] * 2


def test_a_call_that_reached_the_server_longer_ago_than_the_deadline_is_refused_before_it_queues():
    """The server's own backlog (its event loop, Django's steps before the gate) counts against the deadline."""
    gate = FairGate(per_account=1, shed_after=1.0)
    with pytest.raises(Shed) as late:
        with gate.turn("tenant", arrived=time.monotonic() - 1.5):
            pass
    assert "before it reached admission" in late.value.reason and late.value.waited >= 1.5
    assert gate.books.running == 0 and gate.queued() == 0
    with gate.turn("tenant", arrived=time.monotonic()):   # a fresh call goes in at once
        assert gate.books.held == {"tenant": 1}

    async def main():
        agate = AsyncFairGate(per_account=1, shed_after=1.0)
        with pytest.raises(Shed):
            async with agate.turn("tenant", arrived=time.monotonic() - 1.5):
                pass
        return agate.books.running, agate.queued()
    assert asyncio.run(main()) == (0, 0)


def test_a_place_granted_as_the_wait_times_out_is_kept_not_lost():
    """The timeout cancels the waiter's future at once; a place freed before the waiter runs again is
    still granted to it in the books. The waiter must then hold it (and give it back), or it is lost."""
    async def main():
        gate = AsyncFairGate(1, per_account=1, shed_after=0.05)
        admitted: list = []
        holder_in, let_go = asyncio.Event(), asyncio.Event()

        async def holder():
            async with gate.turn("holder"):
                holder_in.set()
                await let_go.wait()

        held = call_task(holder())
        await holder_in.wait()
        waiter = call_task(caller(gate, "late", admitted))
        await until(lambda: gate.queued() == 1, "the late call to queue")
        # Past the deadline with the loop held (time.sleep), then one loop turn: this task resumes first
        # and lets the holder go, and the same turn's timer then cancels the late call's wait; next turn
        # the holder's release grants the place to that late call, whose wake finds it cancelled.
        time.sleep(0.08)
        await asyncio.sleep(0)
        let_go.set()
        await asyncio.gather(held, waiter, return_exceptions=True)
        await until(lambda: gate.books.running == 0, "every place to come back")
        return gate.books.held, gate.queued()
    assert asyncio.run(main()) == ({}, 0)


class StalledLoop:
    """An event loop's clock and timers, moved by hand: LoopLag's samples without waiting on a real loop."""

    def __init__(self) -> None:
        self.now, self.timers = 0.0, []

    def time(self) -> float:
        return self.now

    def call_later(self, delay, callback, *args):
        self.timers.append((self.now + delay, callback, args))
        return self

    def cancel(self) -> None:   # the handle call_later returns
        self.timers.clear()

    def run_until(self, moment: float) -> None:
        """Runs every timer due by `moment`, as a loop that reached that moment does (late if it stalled)."""
        while self.timers and self.timers[0][0] <= moment:
            due, callback, args = self.timers.pop(0)
            self.now = max(self.now, due)
            callback(*args)
        self.now = moment


def test_the_loops_lag_counts_a_stall_at_once_and_forgets_it_over_a_few_samples():
    from plugins_app.services.engine.async_admission import LAG_PERIOD_S, LoopLag

    loop = StalledLoop()
    lag = LoopLag(loop)
    loop.run_until(1.0)   # on time: each sample when due
    assert lag.behind_now() == 0.0
    loop.now = 1.3        # a stall of 0.3 s: the next sample runs that late
    loop.run_until(1.3)
    stalled = lag.behind_now()
    assert 0.3 - LAG_PERIOD_S <= stalled <= 0.3
    loop.run_until(1.6)   # on time again
    assert 0 <= lag.behind_now() < stalled / 10


def test_the_event_loop_gate_leaves_room_for_its_loops_lag():
    """A loop running behind read a call's bytes late and will write its answer late: the deadline counts
    from twice the lag before the handler saw the call (at most half the deadline)."""
    async def main():
        gate = AsyncFairGate(1, per_account=1, shed_after=1.0, lag=lambda: 0.3)
        now = time.monotonic()
        async with gate.turn("quiet", arrived=now):   # a place free: a fresh call goes in, lag or not
            assert gate.books.held == {"quiet": 1}
        async with gate.turn("holder"):
            # 0.6 s behind the handler, and half the deadline for the loop's lag: refused before it queues.
            with pytest.raises(Shed) as late:
                await call_task(arriving(gate, time.monotonic() - 0.6))
            assert "before it reached admission" in late.value.reason and gate.queued() == 0
        lagless = AsyncFairGate(1, per_account=1, shed_after=1.0, lag=lambda: 0.0)
        return await call_task(arriving(lagless, time.monotonic() - 0.6))   # the same call, no lag: it runs

    async def arriving(gate, arrived):
        async with gate.turn("noisy", arrived=arrived):
            return dict(gate.books.held)
    assert asyncio.run(main()) == {"noisy": 1}

"""Many chains in flight on one isolate, interleaved at every await.

A chain that awaits (a host call, a timer, a promise waiting on either) parks, and the isolate runs
other chains meanwhile. Every way into a plugin's code is a call this module posts to the isolate's
thread — a chain's start, a host call's answer, a timer, an expiry — each followed by that chain's
poll, which answers its state and what its code asked for meanwhile (host calls to make, timers to
set). So the engine knows, for every turn of the isolate's thread, which invocation it ran: the
turn's CPU (the thread's clock when the poll's answer arrived, less when the one before arrived) is
charged to that invocation, and a turn that holds the thread too long is stopped alone
(`Isolate.terminate`), without closing the isolate or touching the chains parked in it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from plugins_app.runtime import wire
from plugins_app.runtime.engine.isolate import Isolate, IsolateLost, JSEvalException, JSOOMException
from plugins_app.runtime.engine.memory import MemoryBooks
from plugins_app.runtime.engine.v8_queue import Early, EvalQueue
from plugins_app.runtime.protocol import CrashKind, Job, JsonObject, Op, TraceEntry
from plugins_app.runtime.tables.members import UNCHARGED_MEMBERS

GRACE_SECONDS = 0.05         # slack over a handler's budget before a turn holding the thread is stopped
SLICE_SECONDS = 0.02         # how often a busy isolate thread is looked at
SLOW_NOTICE_SECONDS = 0.5    # a handler keeping the isolate's thread this long is reported once
HOLD_SECONDS = 1.0           # ...and this long: its thread yields the CPU, its account's other calls skip it
# A turn still running after BURN_SECONDS that has computed for BURN_CPU_SECONDS of it gets the lowest
# nice value at once (the scheduler still gives it its turn, so a legitimate computation finishes,
# only later on a busy machine). SCHED_IDLE, which can starve a thread, waits for HOLD_SECONDS.
BURN_SECONDS = 0.1
BURN_CPU_SECONDS = 0.05
# CPU a handler may use past its HUB_CPU_MS before a turn that has not yet ended is stopped.
CPU_GRACE_SECONDS = 0.1
# A terminated turn that has not unwound by then is in native code V8 cannot interrupt: only closing
# the isolate stops it.
TERMINATE_GRACE_SECONDS = 1.0
BUSY_SECONDS = 0.02          # a turn holding the thread longer than this makes the engine busy
# A turn holding the thread this long sends the requests waiting in the engine's line elsewhere. Not at
# BUSY_SECONDS: most turns that long end soon after, and a request sent elsewhere loses its account's
# warm compartments (module state included); past this the turn is likely a loop that runs to HUB_CPU_MS.
SEND_BACK_SECONDS = 0.1
YIELD_TURNS = 4              # newcomers' turns a chain's next entry lets go first while requests wait
# A handler that has computed this long in short turns (a thousand timers, say) makes its engine busy
# while its chain takes turns: newcomers go to another engine rather than taking turns between its own.
HEAVY_CPU_SECONDS = 0.05
# Entries that make a parked chain ready to go on: what it awaited has arrived.
READY_ENTRIES = frozenset({"reply", "fire"})

# A handler stopped in place (its turn terminated; the isolate and the chains parked in it go on).
STOPPED_WARNING = "never yielded within {budget} ms (it was stopped; the chains beside it went on)"
STOPPED_CPU_WARNING = "used over {cpu} ms of CPU without yielding (HUB_CPU_MS; it was stopped)"
# A handler that cost its isolate (closed and replaced).
CRASH_WARNINGS = {
    CrashKind.WEDGED.value: "never yielded within {budget} ms (its isolate was closed and replaced)",
    CrashKind.MEMORY.value: "exceeded the isolate's memory limit (its isolate was replaced)",
    CrashKind.CRASHED.value: "broke the chain runner (its isolate was replaced)",
}
CPU_WARNING = "used over {cpu} ms of CPU without yielding (HUB_CPU_MS; its isolate was closed and replaced)"
BYSTANDER_WARNING = ("its engine's isolate was replaced while this chain waited (another handler cost it): "
                     "this handler did not finish and the chain went on without it")

log = logging.getLogger(__name__)


@dataclass
class Flight:
    """One chain in flight on an isolate, as the engine follows it (the harness holds the rest)."""

    seq: int
    job: Job
    account: str
    handler_ids: list[str]
    budget: float                 # seconds of wall clock each handler may take (uncharged waits aside)
    cpu_ms: int                   # CPU one invocation may use
    finished: asyncio.Future[tuple[Any, bool]]   # (the chain's final poll, answered early), or IsolateLost
    index: int = 0
    started: float = 0.0          # when the current handler started (epoch seconds)
    cpu: float = 0.0              # CPU seconds the current handler has used
    uncharged_seconds: float = 0.0
    uncharged_inflight: int = 0
    host_calls: int = 0
    expired_index: int = -1       # the handler already told to expire
    slow_noticed: bool = False
    holder: str | None = None     # the handler holding the isolate past HOLD_SECONDS, if any
    lowered: bool = False
    deadline: asyncio.TimerHandle | None = None
    timers: set[asyncio.TimerHandle] = field(default_factory=set)
    posted: bool = False          # an entry of this chain is on the isolate's thread's line
    pending: deque[tuple[str, str]] = field(default_factory=deque)   # entries waiting for it: (name, receiver)
    yields_left: int = 0          # turns of newcomers its next entry still lets go first
    # How its finishing turn may answer the caller on the isolate's thread (None: through this loop).
    # Every turn's, not only the first's: a chain that awaited a host call or a timer ends in a later one.
    early: Early | None = None
    # Host calls (their JS call ids) already sent from the isolate's thread, for the loop to account for.
    sent_early: set[int] = field(default_factory=set)
    # The engine's own delay: seconds the current handler was ready to go on (a host reply or a timer
    # in) while the isolate's thread ran other chains, and since when it is ready now. A timeout it
    # had a share in is marked for the web process (hubHeldMs), so no strike falls on the plugin.
    line_seconds: float = 0.0
    ready_since: float | None = None
    hub_held: dict[str, float] = field(default_factory=dict)   # handler id -> seconds, at its expiry


@dataclass
class HostWait:
    seq: int
    js_call: int
    uncharged: bool
    started: float


class Flights:
    """The chains in flight on one isolate, and the one reader of its answers."""

    def __init__(self, iso: Isolate, engine: FlightsOwner):
        assert iso.queue is not None and iso.poll_fn is not None, "a started isolate"
        self.iso = iso
        self.queue: EvalQueue = iso.queue
        self.engine = engine
        self.flights: dict[int, Flight] = {}
        # What each answered evaluation posted and not yet answered is for: a chain's poll (its run
        # seq) or another evaluation's future (loading a plugin's code).
        self.expect: deque[int | asyncio.Future[object]] = deque()
        self.turn_started = time.monotonic()     # when the thread took the post it runs now
        self.cpu_mark = iso.cpu_seconds()        # the thread's CPU when the last answer arrived
        self.terminating: tuple[int, int, float] | None = None   # (seq, index, when) of a stopped turn
        self.held_account: str | None = None     # shown on the board while a turn holds the thread
        self.sent_back = False                   # the turn holding the thread sent the waiting requests elsewhere
        self.demoted: Flight | None = None       # the chain whose turn lowered the thread's priority
        self.closed = False
        self._ticker: asyncio.TimerHandle | None = None
        self.heavy: set[int] = set()          # chains whose handler has computed past HEAVY_CPU_SECONDS
        self.yielding: deque[int] = deque()   # chains whose next entry lets the engine's waiting requests go first
        self._releasing = False
        self.called_early = 0     # host calls sent from the isolate's thread (engine status)
        self.queue.read_with(self._read)

    # -- posting -----------------------------------------------------------------------------------
    def _post(self, entry: str, this: str, seq: int, early: Early | None = None) -> None:
        """An entry into chain `seq`, then its poll. A chain has one entry on the isolate's thread at a
        time; the others wait here, so each turn's CPU is known (and a chain over its budget stopped)
        before its next turn is posted, and one chain's thousand timers can't fill the thread's line."""
        if self.closed:
            return
        flight = self.flights.get(seq)
        if flight is not None:
            if entry in READY_ENTRIES and flight.ready_since is None:
                flight.ready_since = time.monotonic()
            if flight.posted:
                flight.pending.append((entry, this))
                return
            flight.posted = True
        self._send(entry, this, seq, early)

    def _send(self, entry: str, this: str, seq: int, early: Early | None = None) -> None:
        if early is None and (flight := self.flights.get(seq)) is not None:
            early = flight.early
        if not self.expect:
            self.turn_started = time.monotonic()
        fn = self.iso.run_chain_fn if entry == "run" else self.iso.entries[entry]
        assert fn is not None and self.iso.poll_fn is not None
        self.queue.post_call(fn, this, answered=False)
        self.queue.post_call(self.iso.poll_fn, str(seq), early=early)
        self.expect.append(seq)
        self._watching()

    def evaluate(self, fn: Any, this: str) -> asyncio.Future[object]:
        """Any other call of the harness (loading code) in line with the chains' turns: its value,
        or what it threw, comes back in the future."""
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        if not self.expect:
            self.turn_started = time.monotonic()
        self.queue.post_call(fn, this)
        self.expect.append(future)
        self._watching()
        return future

    def start(self, job: Job, seq: int, body: str, handler_ids: list[str], budget_ms: int, cpu_ms: int,
              early: Early | None) -> Flight:
        loop = asyncio.get_running_loop()
        flight = Flight(seq, job, str(job.message.get("account")), handler_ids, budget_ms / 1000, cpu_ms,
                        loop.create_future(), started=time.time(), early=early)
        self.flights[seq] = flight
        if early is not None:
            early.turn = lambda value: self._host_calls_now(flight, value)
        self._post("run", body, seq, early)
        return flight

    def _watching(self) -> None:
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().call_later(SLICE_SECONDS, self._tick)

    def idle(self) -> bool:
        """Whether the isolate's thread has nothing of ours to run (every chain in flight is parked)."""
        return not self.expect

    def busy(self) -> bool:
        """Whether one turn has held the isolate's thread past BUSY_SECONDS, or a heavy chain (past
        HEAVY_CPU_SECONDS) is taking turn after turn. A turn whose answer the
        isolate's thread has sent already does not: its caller may be back with its next call before
        this loop has read it, and sending that call elsewhere would cost it its warm compartments."""
        return not self.queue.answered_early() and (
            self._heavy_taking_turns() or (bool(self.expect) and time.monotonic() - self.turn_started > BUSY_SECONDS))

    def _heavy_taking_turns(self) -> bool:
        """Whether a heavy chain has an entry on the thread's line or waiting for it (one parked at an
        await takes no turns)."""
        return any(f.posted for f in (self.flights.get(seq) for seq in self.heavy) if f is not None)

    def held(self) -> bool:
        """Whether a turn holds the thread now, or a heavy chain will take more of its turns: a request
        waiting here would wait for it."""
        return self.held_account is not None or self._heavy_taking_turns()

    def holding(self) -> Flight | None:
        return next((f for f in self.flights.values() if f.holder is not None), None)

    # -- answers -----------------------------------------------------------------------------------
    def _read(self) -> None:
        """Takes every answer that has arrived, in posting order (called by the queue's wake)."""
        try:
            self._read_answers()
        finally:
            self._yielded()

    def _read_answers(self) -> None:
        while self.expect and not self.closed and self.queue.ready():
            seq = self.expect.popleft()
            if isinstance(seq, asyncio.Future):
                self._evaluated(seq)
                continue
            try:
                value, early = self.queue.take_ready()
            except JSOOMException:
                self._lost(CrashKind.MEMORY.value, seq)
                return
            except JSEvalException:   # the poll itself was stopped (a termination meant for the turn before)
                value, early = None, False
            cpu = self.queue.cpu_mark
            used, self.cpu_mark = cpu - self.cpu_mark, cpu
            began, self.turn_started = self.turn_started, time.monotonic()
            if self.terminating is not None:
                self.terminating = None
                self.queue.cancel_termination()
            self.sent_back = False
            if self.held_account is not None:
                self.held_account = None
                self.engine.held_by(None)
            if self.demoted is not None:   # the turn that was lowered is over: its thread gets its priority back
                self._restore(self.demoted)
            self.engine.turn_ended()
            if self.iso.memory_exceeded():
                self._lost(CrashKind.MEMORY.value, seq)
                return
            try:
                self._answered(seq, value, early, used, began)
            except Exception:   # a fault here must cost one chain, never the engine
                log.exception("engine: a chain's answer could not be read")
                flight = self.flights.pop(seq, None)
                if flight is not None:
                    self._finish(flight, {"fatal": "answer"}, False)

    def _yielded(self) -> None:
        """A turn ended: the chains yielding to newcomers are looked at after the loop's next step."""
        if self.yielding and not self._releasing and not self.closed:
            self._releasing = True
            asyncio.get_running_loop().call_soon(self._release_yielding)

    def _tick(self) -> None:
        """Every SLICE_SECONDS while something of ours is on the isolate's line: a look at the turn
        holding the thread (and at the process's memory bound)."""
        self._ticker = None
        if self.closed or not self.expect:
            return
        if self.engine.memory.over_bound():
            seq = self.expect[0]
            self._lost(CrashKind.MEMORY.value, seq if isinstance(seq, int) else 0)
            return
        if time.monotonic() - self.turn_started >= SLICE_SECONDS:
            self._watch()
        if not self.closed:
            self._ticker = asyncio.get_running_loop().call_later(SLICE_SECONDS, self._tick)

    def _evaluated(self, future: asyncio.Future[object]) -> None:
        try:
            value, _ = self.queue.take_ready()
        except Exception as exc:   # noqa: BLE001 - what the evaluation threw goes to its caller
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(value)
        self.cpu_mark = self.queue.cpu_mark
        self.turn_started = time.monotonic()

    def _answered(self, seq: int, value: object, early: bool, used: float, began: float) -> None:
        """`began`: when the isolate's thread took this turn (the turn before it answered then)."""
        flight = self.flights.get(seq)
        if flight is None:
            return   # a poll for a chain already answered: what its code asked for is never served
        flight.posted = False
        if flight.ready_since is not None:   # it was ready from then, and waited for the thread till `began`
            flight.line_seconds += max(0.0, began - flight.ready_since)
            flight.ready_since = None
        try:
            self._take(flight, value, early, used)
        finally:
            if flight.seq in self.flights and not flight.posted:
                if flight.pending:
                    if any(name in READY_ENTRIES for name, _ in flight.pending):
                        flight.ready_since = time.monotonic()   # arrived during its own turn: ready from its end
                    flight.posted = True
                    if self.engine.waiting():
                        # Requests wait in the engine's line, and a chain starts only on an idle
                        # thread: else a chain with a thousand timers to fire keeps the thread busy
                        # with 4 ms turns and every newcomer waits for its last.
                        flight.yields_left = YIELD_TURNS
                        self.yielding.append(flight.seq)
                    else:
                        self._send_pending(flight.seq)
                elif not isinstance(value, str) and not early:
                    flight.posted = True   # the poll was stopped (a termination meant for the turn before): ask again
                    self._send_poll(flight.seq)

    def _release_yielding(self) -> None:
        """After the engine's loop has had its step (and started a waiting request if it could): the
        chains that yield to newcomers post their next entry once the thread is idle (no newcomer
        started), the line is empty, or they have let YIELD_TURNS turns of others go first."""
        self._releasing = False
        keep: deque[int] = deque()
        for seq in self.yielding:
            flight = self.flights.get(seq)
            if flight is None:
                continue
            if self.idle() or not self.engine.waiting() or flight.yields_left <= 0:
                self._send_pending(seq)
            else:
                flight.yields_left -= 1
                keep.append(seq)
        self.yielding = keep

    def _send_pending(self, seq: int) -> None:
        """Posts the next entry waiting for chain `seq` (marked posted already)."""
        flight = self.flights.get(seq)
        if flight is None or self.closed:
            return
        if flight.pending:
            entry, this = flight.pending.popleft()
            self._send(entry, this, seq)
        else:
            flight.posted = False

    def _take(self, flight: Flight, value: object, early: bool, used: float) -> None:
        if early:
            self._finish(flight, None, True)
            return
        if not isinstance(value, str):
            return
        status: JsonObject = wire.loads(value)
        if status.get("done") or "missing" in status or status.get("idle"):
            self._finish(flight, status, False)
            return
        index = status["index"]
        if index != flight.index:   # a new handler: its CPU and its waits count from zero
            flight.index, flight.cpu, flight.uncharged_seconds, flight.line_seconds = index, 0.0, 0.0, 0.0
            flight.slow_noticed = False
            # The turn may have run the handlers before it too: of its CPU, this handler is charged
            # no more than the time since it started (one thread's CPU can't outrun the clock).
            used = min(used, max(0.0, time.time() - status["started"] / 1000))
        flight.cpu += used
        if flight.cpu > HEAVY_CPU_SECONDS:
            self.heavy.add(flight.seq)
        flight.started = status["started"] / 1000
        for item in status.get("out") or []:
            self._asked(flight, item)
        if flight.cpu > flight.cpu_ms / 1000:
            self.expire(flight, cpu=True)
        else:
            self._arm(flight)

    def _send_poll(self, seq: int) -> None:
        assert self.iso.poll_fn is not None
        if not self.expect:
            self.turn_started = time.monotonic()
        flight = self.flights.get(seq)
        self.queue.post_call(self.iso.poll_fn, str(seq), early=flight.early if flight is not None else None)
        self.expect.append(seq)
        self._watching()

    def _finish(self, flight: Flight, status: JsonObject | None, early: bool) -> None:
        if status is not None and flight.hub_held:
            for entry in status.get("trace") or []:
                held = flight.hub_held.get(str(entry.get("id"))) if isinstance(entry, dict) else None
                if held and entry.get("status") == "timeout":
                    entry["hubHeldMs"] = round(held * 1000, 1)
        self.flights.pop(flight.seq, None)
        self.heavy.discard(flight.seq)
        self._disarm(flight)
        if not flight.finished.done():
            flight.finished.set_result((status, early))

    def _disarm(self, flight: Flight) -> None:
        if flight.deadline is not None:
            flight.deadline.cancel()
            flight.deadline = None
        for timer in flight.timers:
            timer.cancel()
        flight.timers.clear()

    # -- what a chain's code asked for -------------------------------------------------------------
    def _host_calls_now(self, flight: Flight, value: object) -> None:
        """On the isolate's thread, as a turn's poll answers: sends the host calls it asks for at once,
        as the loop would once woken (a round trip of this process's threads sooner; the web process
        starts them that much earlier). Only a poll whose chain goes on asks for any (a finished
        chain's calls are never made). The loop accounts for them when it reads the same answer; a
        reply that comes back before that waits in the chain's line, as any entry does."""
        if self.closed or not isinstance(value, str) or '"member"' not in value:
            return
        status: JsonObject = wire.loads(value)
        if status.get("done") or "missing" in status or status.get("idle") or "fatal" in status:
            return
        for item in status.get("out") or []:
            if "timer" not in item and isinstance(item.get("call"), int):
                self._call_out(flight, item)
                flight.sent_early.add(item["call"])   # after: a call that failed to go out is the loop's to send
                self.called_early += 1

    def _call_out(self, flight: Flight, item: JsonObject) -> None:
        flight.host_calls += 1
        uncharged = item.get("member") in UNCHARGED_MEMBERS
        self.engine.host_call(self, flight, item, HostWait(flight.seq, item["call"], uncharged, time.monotonic()))

    def _asked(self, flight: Flight, item: JsonObject) -> None:
        if "timer" in item:
            delay = max(0.0, float(item.get("ms") or 0) / 1000)
            timer_id = str(item["timer"])
            handle: asyncio.TimerHandle | None = None

            def fire() -> None:
                if handle is not None:
                    flight.timers.discard(handle)
                if flight.seq in self.flights:
                    self._post("fire", timer_id, flight.seq)

            handle = asyncio.get_running_loop().call_later(delay, fire)
            flight.timers.add(handle)
            return
        if item.get("member") in UNCHARGED_MEMBERS:
            # Counted here, on the loop, also when the call went out from the isolate's thread: if its
            # reply was read first, host_replied took one off, and this evens it.
            flight.uncharged_inflight += 1
        if item.get("call") in flight.sent_early:
            flight.sent_early.discard(item["call"])
            return
        self._call_out(flight, item)

    def host_replied(self, wait: HostWait, reply: JsonObject) -> None:
        flight = self.flights.get(wait.seq)
        if flight is None:
            return
        if wait.uncharged:
            flight.uncharged_inflight -= 1
            flight.uncharged_seconds += time.monotonic() - wait.started
        answer = {"ok": bool(reply.get("ok", False)), "value": reply.get("value"), "error": reply.get("error")}
        self._post("reply", wire.dumps([wait.js_call, answer]).decode(), wait.seq)

    # -- budgets -----------------------------------------------------------------------------------
    def _arm(self, flight: Flight) -> None:
        """Wakes at the current handler's deadline (none while an uncharged host call is out)."""
        if flight.deadline is not None:
            flight.deadline.cancel()
            flight.deadline = None
        if flight.uncharged_inflight or flight.expired_index == flight.index:
            return
        due = flight.started + flight.budget + flight.uncharged_seconds
        flight.deadline = asyncio.get_running_loop().call_later(
            max(0.0, due - time.time()), self._overdue, flight.seq, flight.index)

    def _overdue(self, seq: int, index: int) -> None:
        flight = self.flights.get(seq)
        if flight is not None and flight.index == index and not flight.uncharged_inflight:
            self.expire(flight)

    def expire(self, flight: Flight, cpu: bool = False) -> None:
        """The handler ran out of its budget while it awaited (or used its CPU in turns): the harness
        answers its invocation as a timeout and the chain goes on."""
        if flight.expired_index == flight.index:
            return
        flight.expired_index = flight.index
        held = flight.line_seconds + (time.monotonic() - flight.ready_since if flight.ready_since is not None else 0.0)
        if not cpu and held > 0:
            flight.hub_held[flight.handler_ids[flight.index]] = held
            flight.early = None   # its answer goes through this loop, where its trace can say so
        # Its timers go with its invocation: no need to post them one by one for the harness to drop.
        flight.pending = deque(p for p in flight.pending if p[0] != "fire")
        self._post("expire", wire.dumps([flight.seq, flight.index, flight.cpu_ms if cpu else 0]).decode(),
                   flight.seq)

    def _watch(self) -> None:
        """No answer for a slice: a turn holds the thread. Look at whose it is and how long."""
        now = time.monotonic()
        if self.terminating is not None:
            if now - self.terminating[2] > TERMINATE_GRACE_SECONDS:   # in native code V8 can't stop
                self._lost(CrashKind.WEDGED.value, self.terminating[0], stopped=True)
            return
        seq, index, entered = self.iso.progress()
        flight = self.flights.get(seq)
        if flight is None or not 0 <= index < len(flight.handler_ids):
            return   # the harness's own work (loading code, a poll): nothing to blame
        if index == flight.index:
            started, spent, uncharged = flight.started, flight.cpu, flight.uncharged_seconds
        else:   # the chain went on to this handler within the turn
            started, spent, uncharged = entered / 1000, 0.0, 0.0
        held = now - self.turn_started
        turn_cpu = self.iso.cpu_seconds() - self.cpu_mark
        if index != flight.index:
            # The turn also ran the handlers before this one: this one can have used no more of the
            # thread's CPU than the time since it entered.
            turn_cpu = min(turn_cpu, max(0.0, time.time() - started))
        used = spent + turn_cpu
        if held > BUSY_SECONDS and self.held_account is None:
            self.held_account = flight.account
            self.engine.held_by(flight.account)
        if held > SEND_BACK_SECONDS and not self.sent_back:
            self.sent_back = True
            self.engine.send_back_waiting()
        if used > flight.cpu_ms / 1000 + CPU_GRACE_SECONDS:
            self._stop(flight, index, cpu=True)
            return
        if time.time() > started + flight.budget + uncharged + GRACE_SECONDS and held > GRACE_SECONDS:
            self._stop(flight, index)
            return
        if not flight.lowered and held > BURN_SECONDS and turn_cpu > BURN_CPU_SECONDS:
            flight.lowered = True
            self.demoted = flight
            self.engine.lower(self.iso)
        if not flight.slow_noticed and held > SLOW_NOTICE_SECONDS:
            flight.slow_noticed = True
            flight.job.client.send({"op": Op.SLOW.value, "handler": flight.handler_ids[index],
                                    "heldMs": round(held * 1000)})
        if flight.holder is None and held > HOLD_SECONDS:
            flight.holder = flight.handler_ids[index]
            self.demoted = flight
            self.engine.held_long(self.iso)

    def _stop(self, flight: Flight, index: int, cpu: bool = False) -> None:
        """Terminates the turn holding the thread (that handler's code only) and has the harness go on
        with the chain's next handler, on the value before it."""
        if not self.queue.terminate():
            return
        self.terminating = (flight.seq, index, time.monotonic())
        flight.index = index
        budget_ms = round(flight.budget * 1000)
        warning = STOPPED_CPU_WARNING.format(cpu=flight.cpu_ms) if cpu else STOPPED_WARNING.format(budget=budget_ms)
        record: TraceEntry = {"id": flight.handler_ids[flight.index], "status": "timeout", "changed": False,
                              "durationMs": budget_ms, "warning": warning, "logs": [], "logsDropped": 0,
                              "hostCalls": 0, "crash": CrashKind.WEDGED.value}
        flight.expired_index = flight.index
        self._restore(flight)
        flight.pending = deque(p for p in flight.pending if p[0] != "fire")
        flight.pending.appendleft(("abandon", wire.dumps([flight.seq, flight.index, record]).decode()))

    def _restore(self, flight: Flight) -> None:
        if (flight.holder is not None or flight.lowered) and not self.engine.restore(self.iso):
            log.warning("engine: an isolate thread could not get its priority back")
        flight.holder, flight.lowered = None, False
        if self.demoted is flight:
            self.demoted = None

    # -- losing the isolate ----------------------------------------------------------------------
    def _lost(self, kind: str, seq: int, stopped: bool = False) -> None:
        """The isolate must go (memory, or a turn that would not stop): the chain whose turn it was is
        its culprit; every other chain in flight is a bystander. Each chain's coroutine takes it from
        there (engine/run.py)."""
        progress_seq, progress_index, _ = self.iso.progress()
        culprit_seq = progress_seq if progress_seq in self.flights else seq
        culprit_key: str | None = None
        self.close()
        for flight in list(self.flights.values()):
            lost = IsolateLost(kind, culprit=flight.seq == culprit_seq)
            lost.host_calls = flight.host_calls
            if lost.culprit:
                lost.index = progress_index if progress_seq == flight.seq else flight.index
                if stopped and flight.expired_index == lost.index and flight.cpu > flight.cpu_ms / 1000:
                    lost.cpu_ms = flight.cpu_ms
                lost.checkpoint = self.iso.checkpoint(flight.seq, lost.index) if lost.index > 0 else None
                if 0 <= lost.index < len(flight.handler_ids):
                    culprit_key = f"{flight.account}/{flight.handler_ids[lost.index]}"
            self._disarm(flight)
            if not flight.finished.done():
                flight.finished.set_exception(lost)
        self.flights.clear()
        self._fail_evaluations(kind)
        self.engine.isolate_lost(self.iso, kind, culprit_key)

    def _fail_evaluations(self, kind: str) -> None:
        for waiting in self.expect:
            if isinstance(waiting, asyncio.Future) and not waiting.done():
                waiting.set_exception(IsolateLost(kind, culprit=False))
        self.expect.clear()

    def fail_all(self, kind: str) -> None:
        """The isolate was closed from outside (replaced): every chain in flight is a bystander."""
        self.close()
        for flight in list(self.flights.values()):
            lost = IsolateLost(kind, culprit=False)
            lost.host_calls = flight.host_calls
            self._disarm(flight)
            if not flight.finished.done():
                flight.finished.set_exception(lost)
        self.flights.clear()
        self._fail_evaluations(kind)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.queue.read_with(None)
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for flight in self.flights.values():
            self._disarm(flight)


class FlightsOwner(Protocol):
    """What Flights needs of its engine (process.py's Engine provides it)."""

    @property
    def memory(self) -> MemoryBooks: ...

    def host_call(self, flights: Flights, flight: Flight, item: JsonObject, wait: HostWait) -> None: ...
    def held_by(self, account: str | None) -> None: ...
    def turn_ended(self) -> None: ...
    def waiting(self) -> bool: ...
    def send_back_waiting(self) -> None: ...
    def lower(self, iso: Isolate) -> None: ...
    def held_long(self, iso: Isolate) -> None: ...
    def restore(self, iso: Isolate) -> bool: ...
    def isolate_lost(self, iso: Isolate, kind: str, culprit: str | None) -> None: ...


def bystander_trace(handler_ids: list[str]) -> list[TraceEntry]:
    """A chain parked on an isolate that had to go, after it had called out (running it again could
    do twice what it did): it fails open from where it started on this isolate, each of these
    handlers skipped with a warning and no strike (not their doing)."""
    return [{"id": h, "status": "error", "changed": False, "durationMs": 0, "warning": BYSTANDER_WARNING,
             "logs": [], "logsDropped": 0, "hostCalls": 0} for h in handler_ids]

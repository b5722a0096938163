"""An engine process: one V8 isolate shared by many accounts, serving every web process that connects."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import uvloop

from plugins_app.runtime import protocol, wire
from plugins_app.runtime.config import DEFAULT_ENGINE_MEMORY_MB, DEFAULT_MAX_FLIGHTS, EngineConfig
from plugins_app.runtime.engine.bench import bench
from plugins_app.runtime.engine.board import Board
from plugins_app.runtime.engine.code_cache import CodeCache
from plugins_app.runtime.engine.compiler import Compiler
from plugins_app.runtime.engine.flights import BUSY_SECONDS, Flight, Flights, HostWait
from plugins_app.runtime.engine.isolate import (
    LOAD_TIMEOUT_SECONDS,
    Isolate,
    IsolateLost,
    JSOOMException,
    LoadCostIsolate,
)
from plugins_app.runtime.engine.memory import MAX_DROPS, MemoryBooks
from plugins_app.runtime.engine.run import DEMOTED_NICE, run_chain, start_now
from plugins_app.runtime.launch import EngineArgs
from plugins_app.runtime.protocol import CrashKind, Job, JsonObject, Op, RunResult
from plugins_app.runtime.pulse import BEAT_SECONDS, Pulse

MAX_QUEUED = 8               # requests waiting here beyond this are sent elsewhere


class Client:
    """One connection from a web process (a thread there): at most one request in flight. Frames are
    sent from the event loop and from the isolate's thread (an answer, a host call), one whole frame
    at a time."""

    def __init__(self, conn: wire.Frames):
        self.conn = conn
        self.closed = False
        self._sending = threading.Lock()

    def send(self, message: JsonObject | bytes) -> None:
        if self.closed:
            return
        try:
            self.send_bytes(message if isinstance(message, bytes) else wire.dumps(message))
        except OSError:
            self.closed = True

    def send_bytes(self, data: bytes) -> None:
        """One frame; raises OSError when the web process is gone."""
        with self._sending:
            self.conn.send_bytes(data)


class Engine:
    """Implements engine/api.py's EngineSide, which run.py and bench.py are given. Chains run many at
    a time on one isolate (engine/flights.py): one parked at an await costs the engine nothing."""

    def __init__(self, memory_mb: int, limits: protocol.Limits, spare: bool = True, nice: int = 0,
                 engine_memory_mb: int = DEFAULT_ENGINE_MEMORY_MB, board: Board | None = None,
                 max_flights: int = DEFAULT_MAX_FLIGHTS):
        self.memory_mb = memory_mb
        self.board = board   # a shared engine's seat among the others; the lane and private engines have none
        self.memory = MemoryBooks(engine_memory_mb, memory_mb)
        if board is not None:
            self.memory.on_keeper = board.keeper   # the other shared engines send it to the lane too
        # Memory is being counted or looked for: newcomers wait in the queue (a collection takes tens
        # of milliseconds) rather than going to an engine that lacks their state.
        self.relieving = False
        self.limits = limits
        self.keep_spare = spare
        self.max_flights = max_flights   # chains in progress at once; past it requests queue
        self.isolate: Isolate | None = None
        self.flights: Flights | None = None   # the chains in flight on self.isolate
        self.spare: asyncio.Task[Isolate] | None = None
        self.jobs: deque[Job] = deque()   # requests waiting for a place among the chains in flight
        self.jobs_ready = asyncio.Event()
        self.active = 0   # requests being served (loading or in flight)
        self.serving: set[asyncio.Task[None]] = set()
        self.code = CodeCache()
        self.host_waiters: dict[int, tuple[Flights, HostWait]] = {}   # host calls awaiting their HOST_REPLY
        self.call_numbers = itertools.count(1)   # host calls' numbers (next() is atomic: two threads draw them)
        self.run_seq = 0
        self.compiles = 0         # compile requests served (a supervisor's compiler engine takes them all)
        self.early_answers = 0    # answers sent on the isolate's thread by isolates since replaced
        self.early_host_calls = 0  # ...and host calls
        self.replaced = 0
        # Handlers whose compartment this engine's isolate lacked, and of those, the ones whose
        # code its cache lacked too (the web process is asked for them): read through status().
        self.misses = {"compartmentMisses": 0, "codeCacheMisses": 0}
        self.only_client: Client | None = None   # a private engine's one connection
        # A lane engine runs JavaScript at a lower priority, but only on its isolates' threads: the
        # thread that watches budgets and answers must keep its time on a busy machine.
        self.lowered = nice > 0
        self.base_nice = min(os.getpriority(os.PRIO_PROCESS, 0) + nice, DEMOTED_NICE)
        self.compiler = Compiler(memory_mb, limits)
        self._closing: set[asyncio.Task[None]] = set()   # replaced isolates still being closed
        self._becoming: asyncio.Task[None] | None = None   # the isolate being put in place

    def held_by(self, account: str | None) -> None:
        """A turn of `account` holds the isolate's thread past BUSY_SECONDS (None: it ended); the
        board shows it to the other shared engines."""
        if self.board is not None:
            if account is None:
                self.board.release()
            else:
                self.board.hold(account)

    def send_back_waiting(self) -> None:
        """A turn has held the isolate's thread past SEND_BACK_SECONDS: requests waiting in line here
        would wait for it to end (up to HUB_CPU_MS, a second by default, when the turn is a loop's).
        Each that came because this engine was free when it arrived is answered busy, and its caller
        sends it to another engine; one that came to wait here because every engine was busy stays
        (refused again, it would come straight back). None of them has started, so nothing runs twice."""
        self._send_back(lambda job: not job.message.get("wait"))

    def _send_back(self, which: Callable[[Job], bool]) -> None:
        """Answers busy every request waiting in line that `which` picks; the others keep their places."""
        keep: deque[Job] = deque()
        for job in self.jobs:
            if which(job):
                self._refuse(job)
            else:
                keep.append(job)
        self.jobs = keep

    # -- connections ---------------------------------------------------------------------------
    def listen(self, listener: socket.socket) -> None:
        listener.setblocking(False)
        asyncio.get_running_loop().add_reader(listener.fileno(), self._accept, listener)

    def _accept(self, listener: socket.socket) -> None:
        try:
            sock, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        sock.setblocking(True)   # frames are written whole; a large one blocks rather than tears
        self.attach(wire.Frames(sock.detach()))

    def attach(self, conn: wire.Frames) -> Client:
        client = Client(conn)
        asyncio.get_running_loop().add_reader(conn.fileno(), self._readable, client)
        os.set_blocking(conn.fileno(), True)   # uvloop made it non-blocking; frames are written whole
        return client

    def _drop(self, client: Client) -> None:
        client.closed = True
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(client.conn.fileno())
        client.conn.close()
        # Its chains in flight run on (their answers go nowhere); those still waiting never start.
        self.jobs = deque(j for j in self.jobs if j.client is not client)

    def _readable(self, client: Client) -> None:
        while True:
            try:
                message = wire.loads(client.conn.recv_bytes())
            except (EOFError, OSError):
                self._drop(client)
                if self.only_client is client:
                    os._exit(0)   # a private engine lives as long as its one connection
                return
            self._handle(client, message)
            if client.closed or not client.conn.has_frame():   # a frame read already: no wake for it
                return

    def _handle(self, client: Client, message: Any) -> None:   # a decoded frame: a dict, if well formed
        op = message.get("op")
        if op == Op.HOST_REPLY.value:
            waiting = self.host_waiters.pop(message.get("call"), None)
            if waiting is not None:
                flights, wait = waiting
                flights.host_replied(wait, message)
        elif op == Op.PING.value:
            client.send(protocol.result(message.get("id"), **self.status()))
        elif op == Op.COMPILE.value:
            asyncio.get_running_loop().create_task(self._compile(client, message))
        elif op == Op.UNLOAD.value:
            client.send(protocol.result(message.get("id"), **self._unload(message)))
        elif op in (Op.RUN.value, Op.BENCH.value):
            self._admit(client, message)
        else:
            client.send(protocol.result(message.get("id"), error=f"unknown op {op!r}"))

    def _unload(self, message: JsonObject) -> JsonObject:
        """Drops installations' code and compartments (uninstalled, disabled or redeployed), then
        collects, so what their module state held is given back now rather than at the next
        replacement of the isolate. A chain of theirs already running finishes with the copy it has."""
        account, ids = message.get("account"), message.get("ids")
        if not isinstance(account, str) or not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return {"error": "unload wants {account: string, ids: [string]}"}
        keys = [f"{account}/{inst_id}" for inst_id in ids]
        for key in keys:
            self.memory.forget(key)
            self.code.forget(key)
        iso = self.isolate
        held = [key.split("/", 1)[1] for key in keys if iso is not None and key in iso.loaded]
        if iso is not None and held:
            iso.forget(account, held)
            task = asyncio.get_running_loop().create_task(iso.collect())
            self._closing.add(task)   # kept until done, like an isolate being closed
            task.add_done_callback(self._closing.discard)
        return {"unloaded": len(held)}

    def status(self) -> JsonObject:
        iso, flights = self.isolate, self.flights
        holder = flights.holding() if flights is not None else None
        return {"pong": True, "pid": os.getpid(), "replaced": self.replaced, "rssBytes": self.memory.rss(),
                "memoryCharged": self.memory.charged,
                "accounts": sorted({key.split("/", 1)[0] for key in iso.loaded}) if iso else [],
                "compartments": len(iso.loaded) if iso else 0, "queued": len(self.jobs),
                "inFlight": len(flights.flights) if flights is not None else 0,
                "running": flights.held_account if flights is not None else None,
                "holding": holder.holder if holder is not None else None, "busy": self._busy(),
                "heavy": len(flights.heavy) if flights is not None else 0,
                "chainStarts": self.run_seq, "compiles": self.compiles,
                "earlyAnswers": self.early_answers + (flights.queue.answered_early_count() if flights is not None else 0),
                "earlyHostCalls": self.early_host_calls + (flights.called_early if flights is not None else 0),
                **self.misses}

    # -- admission: a busy engine sends newcomers to another engine ------------------------------
    def _admit(self, client: Client, message: JsonObject) -> None:
        job = Job(client, message)
        if self._holder_for(job) or (not message.get("wait") and (self._busy() or len(self.jobs) >= MAX_QUEUED)):
            self._refuse(job)
            return
        if not message.get("wait") and (self._held_elsewhere(job) or self._keeps_memory(job)):
            job.client.send(protocol.result(message.get("id"), busy=True, lane=True, elsewhere=True))
            return
        if not self.jobs and self._room():
            self._serve(job)   # at once: no frame on the fast path, its caller counts it as started
            return
        self.jobs.append(job)
        _say(job, Op.QUEUED)
        self.jobs_ready.set()

    def _room(self) -> bool:
        """Whether a chain may start now: a place among the chains in flight, and no turn holding the
        isolate's thread (a chain posted behind one would count as started, and an engine that died
        meanwhile would fail it open rather than have it sent again)."""
        flights = self.flights
        in_flight = len(flights.flights) if flights is not None else 0
        return (self.active < self.max_flights and not self.relieving and not self.memory.due()
                and self.active == in_flight   # none started but not yet posted (loading its code, say)
                and (flights is None or flights.idle()))

    def waiting(self) -> bool:
        """Whether requests wait in line for a place among the chains in flight."""
        return bool(self.jobs)

    def turn_ended(self) -> None:
        """A turn of the isolate's thread ended: requests waiting in line may start."""
        if self.jobs:
            self.jobs_ready.set()

    def _serve(self, job: Job) -> None:
        job.started = time.monotonic()
        self.active += 1
        started = start_now(self, job)
        task = asyncio.get_running_loop().create_task(self._answer(job, started))
        self.serving.add(task)
        task.add_done_callback(self.serving.discard)

    async def _answer(self, job: Job, started: Flight | None) -> None:
        try:
            reply = await self._execute(job, started)
        except Exception as exc:  # a fault here must cost one request, never the engine
            logging.getLogger(__name__).exception("engine request failed")
            reply = {"fatal": f"{type(exc).__name__}"}
        finally:
            self.active -= 1
            self.chain_ended(job)
            self.jobs_ready.set()
        if reply is not None:
            job.client.send(protocol.result(job.message.get("id"), **reply))

    def _busy(self) -> bool:
        """Whether one turn has held the isolate's thread past BUSY_SECONDS (chains parked at an await
        don't make an engine busy), or it has as many chains in flight as it takes."""
        flights = self.flights
        return (flights is not None and flights.busy()) or self.active >= self.max_flights

    def _holder_for(self, job: Job) -> str | None:
        """The handler of `job`'s chain that is holding this isolate far too long in another call
        of the same account: that call must not wait behind it, nor run it a second time."""
        holder = self.flights.holding() if self.flights is not None else None
        if holder is None or job.message.get("account") != holder.account:
            return None
        wanted = {h.get("id") for h in job.message.get("handlers") or [] if isinstance(h, dict)}
        return holder.holder if holder.holder in wanted else None

    def _keeps_memory(self, job: Job) -> bool:
        """Whether this shared engine sends `job`'s account to the lane for what it keeps (memory.py's
        KEEPER_BYTES): its collections and reliefs then run where no other account waits on them."""
        account = str(job.message.get("account"))
        if self.board is None or not (self.memory.keeps_memory(account) or self.board.keeps_memory(account)):
            return False
        # A charge waiting to be told is told here, where it was made (the web side strikes on it).
        handlers = job.message.get("handlers") or []
        return not self.memory.pending(account, (str(h.get("id")) for h in handlers if isinstance(h, dict)))

    def _held_elsewhere(self, job: Job) -> bool:
        """Whether another shared engine has been busy with this account's chain past BUSY_SECONDS:
        this call then goes to the lane, as it would from that engine, rather than taking a second
        shared engine (an account calling from many connections, each call computing for seconds,
        would otherwise hold them all, and every other account would queue behind it)."""
        return self.board is not None and self.board.held_elsewhere(str(job.message.get("account")), BUSY_SECONDS)

    def _refuse(self, job: Job) -> None:
        flights = self.flights
        held = flights is not None and flights.held()
        job.client.send(protocol.result(job.message.get("id"), busy=True, holder=self._holder_for(job),
                                        lane=flights is not None and job.message.get("account") == flights.held_account,
                                        held=held))

    def lower(self, iso: Isolate) -> None:
        self._set_priority(iso, DEMOTED_NICE, idle=False)

    def held_long(self, iso: Isolate) -> None:
        """A handler has held the isolate past HOLD_SECONDS: its thread gets the CPU only when
        nothing else wants it, and the calls of its account that wait here are sent back."""
        self._set_priority(iso, DEMOTED_NICE, idle=True)
        self._send_back(lambda job: bool(self._holder_for(job)))

    def restore(self, iso: Isolate) -> bool:
        """Give a demoted isolate thread its priority back; False if the system won't allow it."""
        return self._set_priority(iso, self.base_nice, idle=False)

    @staticmethod
    def _set_priority(iso: Isolate, nice: int, *, idle: bool) -> bool:
        """`idle`: SCHED_IDLE as well as the nice value. A niced thread that spins keeps its core
        a while when a web worker wakes; an idle-class one is preempted at once, so a wedged
        handler soaks up only time nothing else wanted."""
        if iso.queue is None or iso.queue.thread_id is None:
            return True
        thread = iso.queue.thread_id   # one thread on Linux
        try:
            os.sched_setscheduler(thread, os.SCHED_IDLE if idle else os.SCHED_OTHER, os.sched_param(0))
            os.setpriority(os.PRIO_PROCESS, thread, nice)
            return True
        except (PermissionError, ProcessLookupError):
            return False

    async def work(self) -> None:
        """Starts waiting requests as places among the chains in flight free up, and keeps the memory
        books (a relief runs while chains are parked: only their compartments are left alone)."""
        while True:
            if self.memory.due() and not self.relieving:
                await self.relieve_memory()
                continue
            if not self.jobs or not self._room():
                self.jobs_ready.clear()
                # A turn of the thread ends with an answer (turn_ended); the rest wake this too.
                await self.jobs_ready.wait()
                continue
            job = self.jobs.popleft()
            _say(job, Op.STARTED)   # it was queued: its caller must know it runs now
            self._serve(job)

    async def _execute(self, job: Job, started: Flight | None = None) -> Mapping[str, Any] | None:
        try:
            if job.message["op"] == Op.BENCH.value:
                return await bench(self, job)
            reply = await run_chain(self, job, started)
            return None if reply.get("answeredEarly") else reply
        except IsolateLost as lost:   # lost outside a handler (loading code): nobody to blame
            await self.replace_isolate()
            return {"loadError": f"the isolate was lost while loading code ({lost.kind})"}

    async def _compile(self, client: Client, message: JsonObject) -> None:
        self.compiles += 1
        reply = await self.compiler.compile(message)
        client.send(protocol.result(message.get("id"), **reply))
        if reply.get("restart"):
            os._exit(3)   # a probe left runaway work behind: start clean (the supervisor restarts us)

    # -- isolates ------------------------------------------------------------------------------
    async def new_isolate(self) -> Isolate:
        iso = await Isolate(self.memory_mb, self.limits).start()
        self.memory.rebase()   # what an isolate's start grew the process by is nobody's plugin
        if self.lowered:
            self._set_priority(iso, self.base_nice, idle=False)
        return iso

    async def ready_isolate(self) -> Isolate:
        """The isolate chains start on (the spare takes the place of a replaced one); every chain
        that asks meanwhile waits for the same one."""
        while self.isolate is None:
            if self._becoming is None:
                self._becoming = asyncio.get_running_loop().create_task(self._become())
            await asyncio.shield(self._becoming)
        return self.isolate

    async def _become(self) -> None:
        try:
            iso = await (self.spare if self.spare is not None else self.new_isolate())
            self.spare = None
            self.isolate, self.flights = iso, Flights(iso, self)
            self._start_spare()
        finally:
            self._becoming = None

    def flights_for(self, iso: Isolate) -> Flights:
        """The chains in flight on `iso` (the current isolate)."""
        assert iso is self.isolate and self.flights is not None, "chains start on the current isolate"
        return self.flights

    def _start_spare(self) -> None:
        if self.keep_spare and self.spare is None:
            self.spare = asyncio.get_running_loop().create_task(self.new_isolate())

    async def replace_isolate(self, why: str = "a handler had to be stopped", culprit: str | None = None) -> None:
        """Close the current isolate (stopping whatever runs in it) and put the spare in its place;
        every account's compartments come back from the code cache on their next call, and each
        installation's next trace says its state was lost, and why."""
        old, self.isolate = self.isolate, None
        flights, self.flights = self.flights, None
        self.replaced += 1
        if flights is not None:
            self.early_answers += flights.queue.answered_early_count()
            self.early_host_calls += flights.called_early
        if flights is not None:   # chains parked in it (when it was not their own turn that cost it)
            flights.fail_all(CrashKind.CRASHED.value)
        if old is not None:
            self.memory.lost([key for key in old.loaded if key != culprit], why)
            # Closed in the background: the caller's answer must not wait for the old isolate's
            # thread to notice it was stopped (slow when it was demoted and the machine is busy).
            closing = asyncio.get_running_loop().create_task(self._close(old))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        await self.ready_isolate()

    def isolate_lost(self, iso: Isolate, kind: str, culprit: str | None) -> None:
        """Flights found the isolate must go (memory, or a turn that would not stop): replace it."""
        if iso is not self.isolate:
            return
        why = {CrashKind.WEDGED.value: "never yielded", CrashKind.MEMORY.value: "ran out of memory"}.get(kind, "broke it")
        task = asyncio.get_running_loop().create_task(
            self.replace_isolate(f"a handler of another installation {why}", culprit=culprit))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    @staticmethod
    async def _close(iso: Isolate) -> None:
        try:
            await iso.close()
        except RuntimeError:
            os._exit(3)   # V8 did not stop: only a new process is certain to

    # -- memory ----------------------------------------------------------------------------------
    def chain_ended(self, job: Job) -> None:
        """Puts what the process grew by during the chain down to its handlers; near a bound, the
        work loop looks for who holds the memory before it takes the next chain."""
        message = job.message
        if message.get("op") != Op.RUN.value or self.memory.unchanged():
            return
        handlers = message.get("handlers")
        ids = [h.get("id") for h in handlers if isinstance(h, dict)] if isinstance(handlers, list) else []
        self.memory.chain_ended(str(message.get("account")), [i for i in ids if isinstance(i, str)])
        if self.memory.due():
            self.jobs_ready.set()

    async def relieve_memory(self) -> None:
        """Near the isolate's heap limit or the process's bound: collect, and if that is not enough,
        drop the compartments of the account the process grew the most by (all its installations
        counted together), one account at a time, until the pressure is gone. Compartments that give
        back a lot between them are charged; otherwise they only lose their state. Either is told on
        their next trace. Newcomers wait in the queue meanwhile."""
        iso = self.isolate
        if iso is None:
            self.memory.recounted()
            self.memory.settled(0)
            return
        self.relieving = True
        try:
            collected = False
            if self.memory.recount is not None:
                await iso.collect()
                collected = True
                self.memory.recounted()
                if not self.memory.relief_due:
                    return
            heap = await iso.heap_used()
            if self.memory.pressed(heap) and not collected:   # after the recount's collection, another finds nothing more
                await iso.collect()
                heap = await iso.heap_used()
            for _ in range(MAX_DROPS):
                keys = self.memory.biggest(self._droppable(iso)) if self.memory.pressed(heap) else []
                if not keys:
                    break
                rss_before, heap_before = self.memory.rss(), heap
                account = keys[0].split("/", 1)[0]
                iso.forget(account, [key.split("/", 1)[1] for key in keys])
                await iso.collect()
                heap = await iso.heap_used()
                self.memory.dropped(keys, max(rss_before - self.memory.rss(), heap_before - heap))
            self.memory.settled(heap)
        finally:
            self.relieving = False

    def _droppable(self, iso: Isolate) -> dict[str, str]:
        """The compartments a relief may drop: not those of chains in flight (they run on with them)."""
        flights = self.flights.flights.values() if self.flights is not None else ()
        busy = {f"{f.account}/{h}" for f in flights for h in f.handler_ids}
        return {key: code_hash for key, code_hash in iso.loaded.items() if key not in busy}

    # -- code ------------------------------------------------------------------------------------
    def remember(self, account: str, code: dict[str, JsonObject]) -> None:
        self.code.remember(account, code)

    async def load_missing(self, iso: Isolate, account: str, missing: list[str],
                           hashes: dict[str, str]) -> list[str]:
        """Load what the code cache holds; returns the ids it does not have (the web process sends them)."""
        absent = []
        self.misses["compartmentMisses"] += len(missing)
        for inst_id in missing:
            item = self.code.get(f"{account}/{inst_id}", hashes.get(inst_id))
            if item is None:
                absent.append(inst_id)
                self.misses["codeCacheMisses"] += 1
                continue
            assert iso.load_fn is not None, "a started isolate has its harness"
            loaded = self.flights_for(iso).evaluate(iso.load_fn, wire.dumps(
                [account, inst_id, item["hash"], item["code"], item.get("config") or {}]).decode())
            try:
                async with asyncio.timeout(LOAD_TIMEOUT_SECONDS):
                    await asyncio.shield(loaded)   # raises what the load threw
            except TimeoutError:
                # Its top level still runs on the isolate's thread: the caller replaces the isolate.
                raise LoadCostIsolate(CrashKind.WEDGED.value, inst_id,
                                      f"its top-level code did not finish within {LOAD_TIMEOUT_SECONDS:g} s") from None
            except JSOOMException:
                raise LoadCostIsolate(CrashKind.MEMORY.value, inst_id,
                                      "its top-level code exceeded the isolate's memory limit") from None
            iso.loaded[f"{account}/{inst_id}"] = item["hash"]
        return absent

    # -- chains ----------------------------------------------------------------------------------
    async def run(self, job: Job) -> RunResult:
        return await run_chain(self, job)

    # -- host calls from JS ------------------------------------------------------------------------
    def host_call(self, flights: Flights, flight: Flight, item: JsonObject, wait: HostWait) -> None:
        """Sends a handler's host call to the web process whose request the chain answers; its
        HOST_REPLY goes back to the chain through `flights`. Called on the event loop or on the
        isolate's thread (Flights._host_calls_now): the call's number is drawn atomically and its
        waiter is in place before the frame leaves."""
        call = next(self.call_numbers)
        self.host_waiters[call] = (flights, wait)
        flight.job.client.send({"op": Op.HOST.value, "id": flight.job.message.get("id"), "call": call,
                                "handler": item.get("handler"), "member": item.get("member"),
                                "args": item.get("args", []), "at": wait.started})


def _say(job: Job, op: Op) -> None:
    """Tells the caller its request waits in line (QUEUED) or, after that, that its chain starts
    (STARTED): if this engine dies in between, nothing of the chain ran and the web process sends it
    again to the engine that replaces this one (web/tier.py). A chain started the moment it arrived
    sends neither (no frame on the fast path): its caller counts it as started."""
    job.client.send(wire.dumps({"op": op.value, "id": job.message.get("id")}))


async def beat(pulse: Pulse) -> None:
    """Stamps the engine's pulse from its event loop (never the isolate's thread): while this runs,
    the engine answers, stops handlers over their budgets and says so; once it stops, the supervisor
    and the web processes know the engine is silent (web/tier.py, engine/supervisor.py)."""
    while True:
        pulse.beat()
        await asyncio.sleep(BEAT_SECONDS)


async def serve(engine: Engine, listener: socket.socket | None, conn: wire.Frames | None, lifeline: int | None,
                pulse: Pulse | None = None) -> None:
    loop = asyncio.get_running_loop()
    await engine.ready_isolate()
    # Only now: V8's first start blocks this loop for a while (seconds on a busy machine), and until
    # the first beat the supervisor's "starting" mark, with its longer grace, stands for the engine.
    beating = loop.create_task(beat(pulse)) if pulse is not None else None
    if listener is not None:
        engine.listen(listener)
    if conn is not None:
        engine.only_client = engine.attach(conn)
        engine.only_client.send({"op": Op.READY.value, "pid": os.getpid()})
    if lifeline is not None:   # the supervisor's pipe: when it closes, the supervisor is gone
        loop.add_reader(lifeline, lambda: os._exit(0))
    try:
        await engine.work()
    finally:
        if beating is not None:
            beating.cancel()


def main() -> None:
    args = EngineArgs.parse(sys.argv[1:])
    seat = Board(args.board, args.seat) if args.board is not None and args.seat is not None else None
    engine = Engine(args.memory_mb, protocol.DEFAULT_LIMITS, spare=args.spare, nice=args.nice,
                    engine_memory_mb=args.engine_memory_mb, board=seat,
                    max_flights=EngineConfig.from_env(os.environ).max_flights)
    listener = socket.socket(fileno=args.listen) if args.listen is not None else None
    conn = wire.Frames(args.conn) if args.conn is not None else None
    if conn is not None:
        os.set_blocking(conn.fileno(), True)
    pulse = Pulse(args.pulse) if args.pulse is not None else None
    uvloop.run(serve(engine, listener, conn, args.lifeline, pulse))   # fewer wake-up costs per request than asyncio's own loop


if __name__ == "__main__":
    main()


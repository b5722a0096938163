"""An engine process: one V8 isolate shared by many accounts, serving every web process that connects."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import time
from collections import OrderedDict, deque
from collections.abc import Iterator, Mapping
from typing import Any

import uvloop

from plugins_app.runtime import protocol, wire
from plugins_app.runtime.config import DEFAULT_ENGINE_MEMORY_MB
from plugins_app.runtime.engine.bench import bench
from plugins_app.runtime.engine.board import Board
from plugins_app.runtime.engine.compiler import Compiler
from plugins_app.runtime.engine.isolate import (
    LOAD_TIMEOUT_SECONDS,
    Isolate,
    IsolateLost,
    JSOOMException,
    LoadCostIsolate,
)
from plugins_app.runtime.engine.memory import MAX_DROPS, MemoryBooks
from plugins_app.runtime.engine.run import DEMOTED_NICE, run_chain, start_attempt
from plugins_app.runtime.launch import EngineArgs
from plugins_app.runtime.protocol import CrashKind, Job, JsonObject, Op, RunResult, RunState
from plugins_app.runtime.tables.members import UNCHARGED_MEMBERS

BUSY_SECONDS = 0.02          # a chain holding the isolate longer than this sends newcomers elsewhere
MAX_QUEUED = 8               # requests waiting here beyond this are sent elsewhere
CODE_CACHE_BYTES = 128 * 1024 * 1024


class Client:
    """One connection from a web process (a thread there): at most one request in flight."""

    def __init__(self, conn: wire.Frames):
        self.conn = conn
        self.closed = False

    def send(self, message: JsonObject | bytes) -> None:
        if self.closed:
            return
        try:
            self.conn.send_bytes(message if isinstance(message, bytes) else wire.dumps(message))
        except OSError:
            self.closed = True


class Engine:
    """Implements engine/api.py's EngineSide, which run.py and bench.py are given."""

    def __init__(self, memory_mb: int, limits: protocol.Limits, spare: bool = True, nice: int = 0,
                 engine_memory_mb: int = DEFAULT_ENGINE_MEMORY_MB, board: Board | None = None):
        self.memory_mb = memory_mb
        self.board = board   # a shared engine's seat among the others; the lane and private engines have none
        self.memory = MemoryBooks(engine_memory_mb, memory_mb)
        # Memory is being counted or looked for between chains: a newcomer waits in the queue (a
        # collection takes tens of milliseconds) rather than going to an engine that lacks its state.
        self.relieving = False
        self.limits = limits
        self.keep_spare = spare
        self.isolate: Isolate | None = None
        self.spare: asyncio.Task[Isolate] | None = None
        self.jobs: deque[Job] = deque()
        self.jobs_ready = asyncio.Event()
        self._running: Job | None = None
        self.state: RunState | None = None
        self.code: OrderedDict[str, JsonObject] = OrderedDict()   # "account/id" -> {"hash", "code", "config"}
        self.code_bytes = 0
        self.host_waiters: dict[int, asyncio.Future[JsonObject]] = {}   # host calls awaiting their HOST_REPLY
        self.host_activity = asyncio.Event()
        self.next_call = 0
        self.run_seq = 0
        self.arrival_starts = 0   # chains started the moment they arrived (see _start_on_arrival)
        self.compiles = 0         # compile requests served (a supervisor's compiler engine takes them all)
        self.replaced = 0
        # Handlers whose compartment this engine's isolate lacked, and of those, the ones whose
        # code its cache lacked too (the web process is asked for them): read through status().
        self.misses = {"compartmentMisses": 0, "codeCacheMisses": 0}
        self._bounce_timer: asyncio.TimerHandle | None = None
        self.only_client: Client | None = None   # a private engine's one connection
        # A lane engine runs JavaScript at a lower priority, but only on its isolates' threads: the
        # thread that watches budgets and answers must keep its time on a busy machine.
        self.lowered = nice > 0
        self.base_nice = min(os.getpriority(os.PRIO_PROCESS, 0) + nice, DEMOTED_NICE)
        self.compiler = Compiler(memory_mb, limits)
        self._closing: set[asyncio.Task[None]] = set()   # replaced isolates still being closed

    @property
    def running(self) -> Job | None:
        """The chain holding the isolate; the board shows its account to the other shared engines."""
        return self._running

    @running.setter
    def running(self, job: Job | None) -> None:
        self._running = job
        if self.board is not None:
            if job is None:
                self.board.release()
            else:
                self.board.hold(str(job.message.get("account")))

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
        # A chain started on arrival runs on (its answer goes nowhere): the work loop must take its result.
        self.jobs = deque(j for j in self.jobs if j.client is not client or j.started_state is not None)

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
            waiter = self.host_waiters.pop(message.get("call"), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
        elif op == Op.PING.value:
            with self._books_kept():   # the status tells what runs, not what awaits its books
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
            if (item := self.code.pop(key, None)) is not None:
                self.code_bytes -= len(item["code"])
        iso = self.isolate
        held = [key.split("/", 1)[1] for key in keys if iso is not None and key in iso.loaded]
        if iso is not None and held:
            iso.forget(account, held)
            task = asyncio.get_running_loop().create_task(iso.collect())
            self._closing.add(task)   # kept until done, like an isolate being closed
            task.add_done_callback(self._closing.discard)
        return {"unloaded": len(held)}

    def status(self) -> JsonObject:
        iso = self.isolate
        return {"pong": True, "pid": os.getpid(), "replaced": self.replaced, "rssBytes": self.memory.rss(),
                "memoryCharged": self.memory.charged,
                "accounts": sorted({key.split("/", 1)[0] for key in iso.loaded}) if iso else [],
                "compartments": len(iso.loaded) if iso else 0, "queued": len(self.jobs),
                "running": self.running.message.get("account") if self.running else None,
                "holding": self.state.holder if self.state else None, "busy": self._busy(),
                "chainStarts": self.run_seq, "startsOnArrival": self.arrival_starts, "compiles": self.compiles,
                **self.misses}

    # -- admission: a busy engine sends newcomers to another engine ------------------------------
    def _admit(self, client: Client, message: JsonObject) -> None:
        with self._books_kept():
            job = Job(client, message)
            if self._holder_for(job) or (not message.get("wait") and (self._busy() or len(self.jobs) >= MAX_QUEUED)):
                self._refuse(job)
                return
            if not message.get("wait") and self._held_elsewhere(job):
                job.client.send(protocol.result(message.get("id"), busy=True, lane=True, elsewhere=True))
                return
            self.jobs.append(job)
            if not (len(self.jobs) == 1 and self.running is None and self._start_on_arrival(job)):
                _say(job, Op.QUEUED)
                self.jobs_ready.set()

    def _start_on_arrival(self, job: Job) -> bool:
        """Starts a warm chain the moment it reaches an idle engine, and lets the work loop sleep
        until the chain needs it: not at all when the chain answers early (_books_kept keeps
        its books). Otherwise the isolate's thread waits for the loop's bookkeeping (its first
        callback needs the GIL), and the web process waits for both. The loop still looks at the
        chain within BUSY_SECONDS, to watch its budget."""
        iso = self.isolate
        message = job.message
        if message.get("op") != Op.RUN.value or message.get("code") or iso is None or iso.queue is None:
            return False
        try:
            handlers = message["handlers"]
            if self.relieving or self.memory.due() or iso.lacking(message["account"], handlers) or \
                    self.memory.pending(message["account"], (h["id"] for h in handlers)):
                return False
            job.started_state = start_attempt(self, iso, job, handlers, message["context"], early=True)
        except (KeyError, TypeError):   # malformed: the work loop answers it as a fault
            return False
        job.started = time.monotonic()
        self.running = job
        self.arrival_starts += 1
        iso.queue.wake_with(self.jobs_ready.set, quiet_after_early=True)
        job.watch = asyncio.get_running_loop().call_later(BUSY_SECONDS, self.jobs_ready.set)
        return True

    @contextlib.contextmanager
    def _books_kept(self) -> Iterator[None]:
        """Keeps the books of a chain started on arrival that settled early (v8_queue), then runs
        the body: the isolate's thread did not wake the loop for them, so the next chain or status
        request to arrive does (or, if none comes first, the work loop when the chain's BUSY_SECONDS
        timer wakes it). The settled value is taken after the body (its handles take a call into
        mini-racer each to free, which a newcomer's start need not wait for), before the loop runs."""
        job, iso = self.running, self.isolate
        if (job is None or job.started_state is None or iso is None or iso.queue is None
                or not iso.queue.settled_early()):
            yield
            return
        queue = iso.queue
        queue.wake_with(None)
        if job.watch is not None:
            job.watch.cancel()
        if self.state is job.started_state:
            self.state = None
        job.started_state = None
        self.jobs.remove(job)
        self.running = None
        self.chain_ended(job)
        try:
            yield
        finally:
            queue.take_ready()

    def _busy(self) -> bool:
        """Whether a chain holds the isolate past BUSY_SECONDS. One whose answer the isolate's thread
        has sent does not: the caller may well be back with its next call before this loop has
        kept its books, and sending that call elsewhere (or, being the same account's, to the
        lane) would leave it waiting behind whatever runs there."""
        running = self.running
        return running is not None and not self._answered() and time.monotonic() - running.started > BUSY_SECONDS

    def _answered(self) -> bool:
        """Whether the running chain's answer went out from the isolate's thread: only books are left."""
        iso = self.isolate
        return iso is not None and iso.queue is not None and iso.queue.answered_early()

    def _holder_for(self, job: Job) -> str | None:
        """The handler of `job`'s chain that is holding this isolate far too long in another call
        of the same account: that call must not wait behind it, nor run it a second time."""
        state = self.state
        if state is None or state.holder is None or job.message.get("account") != state.job.message.get("account"):
            return None
        wanted = {h.get("id") for h in job.message.get("handlers") or [] if isinstance(h, dict)}
        return state.holder if state.holder in wanted else None

    def _held_elsewhere(self, job: Job) -> bool:
        """Whether another shared engine has been busy with this account's chain past BUSY_SECONDS:
        this call then goes to the lane, as it would from that engine, rather than taking a second
        shared engine (an account calling from many connections, each call asleep for seconds,
        would otherwise hold them all, and every other account would queue behind its sleeps)."""
        return self.board is not None and self.board.held_elsewhere(str(job.message.get("account")), BUSY_SECONDS)

    def _refuse(self, job: Job) -> None:
        running = self.running.message.get("account") if self.running else None
        job.client.send(protocol.result(job.message.get("id"), busy=True, holder=self._holder_for(job),
                                        lane=running is not None and job.message.get("account") == running))

    def lower(self, iso: Isolate) -> None:
        self._set_priority(iso, DEMOTED_NICE, idle=False)

    def held_long(self, iso: Isolate) -> None:
        """A handler has held the isolate past HOLD_SECONDS: its thread gets the CPU only when
        nothing else wants it, and the calls of its account that wait here are sent back."""
        self._set_priority(iso, DEMOTED_NICE, idle=True)
        keep: deque[Job] = deque()
        for job in self.jobs:
            if self._holder_for(job):
                self._refuse(job)
            else:
                keep.append(job)
        self.jobs = keep

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

    def _bounce_waiting(self) -> None:
        if self.running is not None and self._answered():
            return   # the loop is only behind on its books: the queue moves on in a moment
        keep: deque[Job] = deque()
        for job in self.jobs:
            if job.message.get("wait"):
                keep.append(job)
            else:
                self._refuse(job)
        self.jobs = keep

    async def work(self) -> None:
        while True:
            if self.memory.due() and self.running is None:   # before the next chain, never during one
                await self.relieve_memory()
                continue
            if not self.jobs:
                self.jobs_ready.clear()
                await self.jobs_ready.wait()
                continue
            job = self.jobs.popleft()
            if job.started_state is None:
                job.started = time.monotonic()
                self.running = job
                _say(job, Op.STARTED)   # it was queued: its caller must know it runs now
            elif job.watch is not None:   # started on arrival, and running since
                job.watch.cancel()
                if self.isolate is not None and self.isolate.queue is not None:
                    self.isolate.queue.wake_with(None)
            self._bounce_timer = asyncio.get_running_loop().call_later(
                max(0.0, BUSY_SECONDS - (time.monotonic() - job.started)), self._bounce_waiting)
            try:
                reply = await self._execute(job)
            except Exception as exc:  # a fault here must cost one request, never the engine
                logging.getLogger(__name__).exception("engine request failed")
                reply = {"fatal": f"{type(exc).__name__}"}
            finally:
                self._bounce_timer.cancel()
                self.running = None
                self.chain_ended(job)
            if reply is not None:
                job.client.send(protocol.result(job.message.get("id"), **reply))

    async def _execute(self, job: Job) -> Mapping[str, Any] | None:
        try:
            if job.message["op"] == Op.BENCH.value:
                return await bench(self, job)
            reply = await self.run(job)
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
        iso = await Isolate(self.memory_mb, self.limits, self.host_call).start()
        self.memory.rebase()   # what an isolate's start grew the process by is nobody's plugin
        if self.lowered:
            self._set_priority(iso, self.base_nice, idle=False)
        return iso

    async def ready_isolate(self) -> Isolate:
        if self.isolate is None:
            self.isolate = await (self.spare if self.spare is not None else self.new_isolate())
            self.spare = None
            self._start_spare()
        return self.isolate

    def _start_spare(self) -> None:
        if self.keep_spare and self.spare is None:
            self.spare = asyncio.get_running_loop().create_task(self.new_isolate())

    async def replace_isolate(self, why: str = "a handler had to be stopped", culprit: str | None = None) -> None:
        """Close the current isolate (stopping whatever runs in it) and put the spare in its place;
        every account's compartments come back from the code cache on their next call, and each
        installation's next trace says its state was lost, and why."""
        old, self.isolate = self.isolate, None
        self.replaced += 1
        if old is not None:
            self.memory.lost([key for key in old.loaded if key != culprit], why)
            # Closed in the background: the caller's answer must not wait for the old isolate's
            # thread to notice it was stopped (slow when it was demoted and the machine is busy).
            closing = asyncio.get_running_loop().create_task(self._close(old))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        await self.ready_isolate()

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
        drop the compartments the process grew the most by, one at a time, until the pressure is
        gone. One that gives back a lot is charged; one that does not only loses its state. Either is
        told on its next trace. Newcomers wait in the queue meanwhile."""
        iso = self.isolate
        if iso is None:
            self.memory.recounted()
            self.memory.settled(0)
            return
        self.relieving = True
        try:
            if self.memory.recount is not None:
                await iso.collect()
                self.memory.recounted()
                if not self.memory.relief_due:
                    return
            heap = await iso.heap_used()
            if self.memory.pressed(heap):
                await iso.collect()
                heap = await iso.heap_used()
            for _ in range(MAX_DROPS):
                key = self.memory.biggest(iso.loaded) if self.memory.pressed(heap) else None
                if key is None:
                    break
                rss_before, heap_before = self.memory.rss(), heap
                account, inst_id = key.split("/", 1)
                iso.forget(account, [inst_id])
                await iso.collect()
                heap = await iso.heap_used()
                self.memory.dropped(key, max(rss_before - self.memory.rss(), heap_before - heap))
            self.memory.settled(heap)
        finally:
            self.relieving = False

    # -- code ------------------------------------------------------------------------------------
    def remember(self, account: str, code: dict[str, JsonObject]) -> None:
        for inst_id, item in code.items():
            key = f"{account}/{inst_id}"
            old = self.code.pop(key, None)
            if old is not None:
                self.code_bytes -= len(old["code"])
            self.code[key] = item
            self.code_bytes += len(item["code"])
        while self.code_bytes > CODE_CACHE_BYTES and len(self.code) > 1:
            _, dropped = self.code.popitem(last=False)
            self.code_bytes -= len(dropped["code"])

    async def load_missing(self, iso: Isolate, account: str, missing: list[str],
                           hashes: dict[str, str]) -> list[str]:
        """Load what the code cache holds; returns the ids it does not have (the web process sends them)."""
        absent = []
        self.misses["compartmentMisses"] += len(missing)
        for inst_id in missing:
            item = self.code.get(f"{account}/{inst_id}")
            if item is None or item["hash"] != hashes.get(inst_id):
                absent.append(inst_id)
                self.misses["codeCacheMisses"] += 1
                continue
            self.code.move_to_end(f"{account}/{inst_id}")
            queue = iso.queue
            assert queue is not None and iso.load_fn is not None, "a started isolate has its queue and harness"
            queue.post_call(iso.load_fn, wire.dumps(
                [account, inst_id, item["hash"], item["code"], item.get("config") or {}]).decode())
            if not await queue.wait(LOAD_TIMEOUT_SECONDS):
                # Its top level still runs on the isolate's thread: the caller replaces the isolate.
                raise LoadCostIsolate(CrashKind.WEDGED.value, inst_id,
                                      f"its top-level code did not finish within {LOAD_TIMEOUT_SECONDS:g} s")
            try:
                queue.take_ready()   # raises what the load threw
            except JSOOMException:
                raise LoadCostIsolate(CrashKind.MEMORY.value, inst_id,
                                      "its top-level code exceeded the isolate's memory limit") from None
            iso.loaded[f"{account}/{inst_id}"] = item["hash"]
        return absent

    # -- chains ----------------------------------------------------------------------------------
    async def run(self, job: Job) -> RunResult:
        return await run_chain(self, job)

    # -- host calls from JS ------------------------------------------------------------------------
    async def host_call(self, raw: str) -> str:
        request = wire.loads(raw)
        state = self.state
        if state is None or request.get("run") != state.seq:
            # Fired without being awaited, and its chain ended before the call was served: the
            # next chain's host must not answer it in that chain's context.
            return wire.dumps({"ok": False, "value": None,
                               "error": f"host.{request.get('member')}: the chain that called it is over"}).decode()
        self.next_call += 1
        call = self.next_call
        waiter = asyncio.get_running_loop().create_future()
        self.host_waiters[call] = waiter
        uncharged = request.get("member") in UNCHARGED_MEMBERS
        started = time.monotonic()
        if uncharged:
            state.uncharged_inflight += 1
        state.job.client.send({"op": Op.HOST.value, "id": state.job.message.get("id"), "call": call,
                               "handler": request.get("handler"),
                               "member": request.get("member"), "args": request.get("args", [])})
        try:
            reply = await waiter
        finally:
            if uncharged:
                state.uncharged_inflight -= 1
                state.uncharged_seconds += time.monotonic() - started
        self.host_activity.set()
        return wire.dumps({"ok": reply.get("ok", False), "value": reply.get("value"),
                           "error": reply.get("error")}).decode()


def _say(job: Job, op: Op) -> None:
    """Tells the caller its request waits in line (QUEUED) or, after that, that its chain starts
    (STARTED): if this engine dies in between, nothing of the chain ran and the web process sends it
    again to the engine that replaces this one (web/tier.py). A chain started the moment it arrived
    sends neither (no frame on the fast path): its caller counts it as started."""
    job.client.send(wire.dumps({"op": op.value, "id": job.message.get("id")}))


async def serve(engine: Engine, listener: socket.socket | None, conn: wire.Frames | None, lifeline: int | None) -> None:
    loop = asyncio.get_running_loop()
    await engine.ready_isolate()
    if listener is not None:
        engine.listen(listener)
    if conn is not None:
        engine.only_client = engine.attach(conn)
        engine.only_client.send({"op": Op.READY.value, "pid": os.getpid()})
    if lifeline is not None:   # the supervisor's pipe: when it closes, the supervisor is gone
        loop.add_reader(lifeline, lambda: os._exit(0))
    await engine.work()


def main() -> None:
    args = EngineArgs.parse(sys.argv[1:])
    seat = Board(args.board, args.seat) if args.board is not None and args.seat is not None else None
    engine = Engine(args.memory_mb, protocol.DEFAULT_LIMITS, spare=args.spare, nice=args.nice,
                    engine_memory_mb=args.engine_memory_mb, board=seat)
    listener = socket.socket(fileno=args.listen) if args.listen is not None else None
    conn = wire.Frames(args.conn) if args.conn is not None else None
    if conn is not None:
        os.set_blocking(conn.fileno(), True)
    uvloop.run(serve(engine, listener, conn, args.lifeline))   # fewer wake-up costs per request than asyncio's own loop


if __name__ == "__main__":
    main()


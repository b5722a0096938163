"""The web side of the engine tier: connections to the machine's engines, and where a chain goes."""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import os
import select
import signal
import socket
import termios
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plugins_app.runtime import wire
from plugins_app.runtime.config import DEFAULT_ISOLATE_MEMORY_MB
from plugins_app.runtime.launch import EngineArgs
from plugins_app.runtime.protocol import CrashKind, JsonObject, Op, TierLayout
from plugins_app.runtime.pulse import Pulses

CONNECT_TIMEOUT_SECONDS = 30.0
MAX_PRIVATE_ENGINES = 8
MAX_SHIPPED = 100_000   # (account, installation, hash) this process remembers having sent
# A wait for an engine's next frame is cut in slices this long, to look at its pulse between them:
# with pulse.SILENT_SECONDS, a stopped engine is noticed within about 1.75 s.
PULSE_LOOK_SECONDS = 0.25

HostHandler = Callable[[JsonObject], JsonObject]   # a HOST message in, its reply's {"ok", "value"/"error"} out
SlowHandler = Callable[[str], None]
Waiting = Callable[[], AbstractContextManager[None]]   # entered around a wait for the engine's next message


class EngineDown(Exception):
    """The engine stopped answering or its process died mid-request; `kind` is a CrashKind value.
    `started`: whether the request's chain may have started when it died (False only when it surely
    had not: never sent, or the engine said it waits in line)."""

    def __init__(self, kind: str = CrashKind.CRASHED.value, started: bool = True):
        super().__init__(kind)
        self.kind = kind
        self.started = started


class EngineUnavailable(EngineDown):
    """No engine took the request: nobody listens on its socket (the supervisor is gone and not back
    yet), or its engine died before the chain started, twice. Nothing of the chain ran; the caller
    may send it again shortly (the API answers 503 with Retry-After)."""

    def __init__(self) -> None:
        super().__init__(CrashKind.CRASHED.value, started=False)


class EngineSilent(EngineUnavailable):
    """The engine stopped answering: its pulse stopped (stopped, hung, or dead with no supervisor to
    replace it), or it beats but this request went unanswered past every budget. A part's fault,
    never a handler's: nothing is struck, the engine is left to its supervisor, and the call is
    answered 503 (`started`: its chain may have run there, so whether it vetoed is unknown) or, when
    it surely had not started, sent to another engine first."""

    def __init__(self, started: bool):
        EngineDown.__init__(self, CrashKind.SILENT.value, started=started)


def unread_bytes(fd: int) -> int:
    """Bytes this end sent on a unix stream socket that the other end has not read yet (what Linux
    still charges to the sender): a request some of whose bytes are unread never started."""
    out = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.TIOCOUTQ, out)
    except OSError:
        return 0
    return out[0]


def silent_down(exchange: Exchange, fd: int) -> EngineSilent:
    """The EngineSilent for a request whose engine went silent: not started when it was never sent,
    waits in the engine's line, or the engine never read all of it."""
    return EngineSilent(started=exchange.sent and not exchange.queued and unread_bytes(fd) == 0)


def check_resend(down: EngineDown, attempt: int) -> None:
    """After `down` on attempt 0 or 1 of a request: returns when the request goes once more on a
    fresh connection (its chain surely never started), raises otherwise."""
    if down.started or isinstance(down, EngineUnavailable):
        raise down
    if attempt:
        raise EngineUnavailable() from None


@dataclass
class Exchange:
    """One request's conversation with an engine, without the I/O (EngineLink's and the async
    tier's): what was sent and heard, which decides whether its chain may have started when the
    connection is lost."""

    request_id: int
    sent: bool = False
    queued: bool = False   # the engine said the request waits in line, and has not said it started since
    heard: bool = False    # any frame of this request came back (it was read, at least)
    # Seconds this process kept each handler's host calls (by handler id) before acting on them or
    # sending their answers: the hub's own delay, which the result carries as hubHeldMs.
    held: dict[str, float] = field(default_factory=dict)

    def note(self, reply: JsonObject) -> None:
        op = reply.get("op")
        self.heard = True
        if op == Op.QUEUED.value:
            self.queued = True
        elif op == Op.STARTED.value:
            self.queued = False
        elif op == Op.HOST.value:
            # The engine stamps a host call with its monotonic clock (the machine's, shared by its
            # processes) as it sends it: the frame waited since in the socket, in the loop's lag and in
            # the admission gate while this call took its place again.
            sent_at = reply.get("at")
            if isinstance(sent_at, float) and reply.get("id") == self.request_id:
                self.hold(reply.get("handler"), time.monotonic() - sent_at)
        elif self.held and self.is_result(reply):
            for entry in reply.get("trace") or []:
                if isinstance(entry, dict) and entry.get("id") in self.held:
                    # Beside what the engine kept the handler waiting for its thread, if anything.
                    entry["hubHeldMs"] = round(float(entry.get("hubHeldMs") or 0) + self.held[entry["id"]] * 1000, 1)

    def hold(self, handler: object, seconds: float) -> None:
        if isinstance(handler, str) and seconds > 0:
            self.held[handler] = self.held.get(handler, 0.0) + seconds

    def is_result(self, reply: JsonObject) -> bool:
        """A frame that ends the request (not QUEUED, STARTED, HOST or SLOW)."""
        return reply.get("op") not in _CONVERSATION and reply.get("id") == self.request_id

    def stray_host_call(self, reply: JsonObject) -> JsonObject | None:
        """The answer to a HOST frame of a chain answered before its handler's unawaited call
        reached us; None for one of this request."""
        if reply.get("id") != self.request_id:
            return {"ok": False, "error": f"host.{reply.get('member')}: the chain that called it is over"}
        return None

    def lost(self, exc: BaseException) -> EngineDown:
        """The EngineDown for a connection lost with `exc` (EOF or an OSError).
        Not started: never sent; waiting in the engine's line; or never read: an engine that dies
        with bytes of ours unread resets the connection (ECONNRESET) instead of closing it (EOF),
        and with nothing heard back those bytes can only be the request itself. A chain started the
        moment it arrived says nothing, and its engine's death is a clean EOF."""
        unread = isinstance(exc, ConnectionResetError) and not self.heard
        return EngineDown(started=self.sent and not self.queued and not unread)


_CONVERSATION = {Op.QUEUED.value, Op.STARTED.value, Op.HOST.value, Op.SLOW.value}


def host_reply(call: JsonObject, answer: JsonObject) -> bytes:
    return wire.dumps({"op": Op.HOST_REPLY.value, "call": call["call"], **answer})


def preferred_order(addresses: list[str], account_key: str) -> list[str]:
    """`addresses` starting at the account's preferred one (crc32 of its key), so its compartments stay warm."""
    first = zlib.crc32(account_key.encode()) % len(addresses)
    return [addresses[(first + i) % len(addresses)] for i in range(len(addresses))]


# A route: yields (address, message) to send, is sent each reply, returns the reply to keep.
Route = Generator[tuple[str, Mapping[str, Any]], JsonObject, JsonObject]


def route(engines: list[str], lane_engines: list[str], account_key: str, message: Mapping[str, Any],
          lane: bool = False, wait_at: str | None = None, silent: frozenset[str] = frozenset(),
          starting: frozenset[str] = frozenset()) -> Route:
    """Where a chain goes, as each engine answers (the sync and async tiers both follow it): the
    account's preferred engine, the next one when that is busy, the lane when its own chain is what
    keeps an engine busy, and, everything busy, a wait at the preferred one. Engines whose pulse
    stopped (`silent`) are passed over as though busy, and those being started too while another
    beats; none left: EngineSilent, nothing sent."""
    candidates = [a for a in preferred_order(lane_engines if lane else engines, account_key) if a not in silent]
    order = [a for a in candidates if a not in starting] or candidates
    if not order:
        raise EngineSilent(started=False)
    unheld = None   # the first engine that was busy only with short turns: the better place to wait
    for address in order:
        reply = yield address, message
        if unheld is None and not reply.get("held"):
            unheld = address
        if not reply.get("busy") or reply.get("holder"):
            return reply   # a holder: the caller leaves that handler out and asks again
        if reply.get("lane") and not lane:
            # This account's own chain keeps that engine busy (or, `elsewhere`, another shared
            # engine): don't spread it to the others. If the lane is busy too, wait behind that
            # chain of its own, which its engine stops waiting on once it holds the isolate too
            # long; when it runs elsewhere, wait in the lane, never in another account's line.
            return (yield from route(engines, lane_engines, account_key, message, True,
                                     wait_at=None if reply.get("elsewhere") else address, silent=silent,
                                     starting=starting))
    # Everything is busy: wait in line where this account is warm, unless a turn holds that engine's
    # thread (a loop runs there until HUB_CPU_MS stops it) and another's are only busy.
    return (yield wait_at or unheld or order[0], dict(message, wait=True))


class ShippedCode:
    """The (account, installation, hash) whose code this process has sent to the engines (bounded)."""

    def __init__(self) -> None:
        self._shipped: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def unsent(self, account_key: str, handlers: list[tuple[str, str]]) -> list[str]:
        with self._lock:
            return [i for i, h in handlers if (account_key, i, h) not in self._shipped]

    def mark(self, account_key: str, handlers: list[tuple[str, str]]) -> None:
        with self._lock:
            for i, h in handlers:
                self._shipped[(account_key, i, h)] = None
            while len(self._shipped) > MAX_SHIPPED:
                self._shipped.popitem(last=False)


class EngineLink:
    """One connection to one engine, used by one thread at a time. It never ends a shared engine:
    one that falls silent (its pulse, `pulses`) is only stopped waiting for; an `owned` one (a
    private engine of this process) silent past the limit is ended here, as nobody else would."""

    def __init__(self, conn: wire.Frames, pid: int | None = None, *, address: str | None = None,
                 pulses: Pulses | None = None, owned: bool = False):
        self.conn = conn
        self.pid = pid
        self.address, self.pulses, self.owned = address, pulses, owned
        self.readable = select.poll()   # made once: Connection.poll builds a selector per call
        self.readable.register(conn.fileno(), select.POLLIN)
        self.next_id = 0

    @classmethod
    def connect(cls, address: str, pulses: Pulses | None = None) -> EngineLink:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_TIMEOUT_SECONDS)
        try:
            sock.connect(address)   # an engine being replaced leaves this in the listen backlog
        except OSError:   # no one listens there (the supervisor is gone): the engine is down, not a bug
            sock.close()
            raise EngineUnavailable() from None
        sock.settimeout(None)
        link = cls(wire.Frames(sock.detach()), address=address, pulses=pulses)
        try:
            link.pid = link.request({"op": Op.PING.value}, silence_limit=CONNECT_TIMEOUT_SECONDS).get("pid")
        except EngineSilent:   # in the backlog of an engine that stopped: nothing ran
            link.close()
            raise EngineSilent(started=False) from None
        except EngineDown:   # accepted by an engine that died before it answered: nothing ran
            raise EngineDown(started=False) from None
        return link

    def request(self, message: Mapping[str, Any], on_host: HostHandler | None = None,
                on_slow: SlowHandler | None = None, silence_limit: float = 30.0,
                waiting: Waiting | None = None) -> JsonObject:
        """Send one request; answer its host calls until the result arrives."""
        self.next_id += 1
        message = dict(message, id=self.next_id)
        exchange = Exchange(self.next_id)
        try:
            self.conn.send_bytes(wire.dumps(message))
            exchange.sent = True
            while True:
                if not self.conn.has_frame():
                    self._await_frame(exchange, silence_limit, waiting)
                reply: JsonObject = wire.loads(self.conn.recv_bytes())
                op = reply.get("op")
                exchange.note(reply)
                if op == Op.HOST.value:
                    self.conn.send_bytes(host_reply(reply, exchange.stray_host_call(reply)
                                                    or self._answer(reply, on_host, waiting, exchange)))
                elif op == Op.SLOW.value:
                    if on_slow is not None:
                        on_slow(reply["handler"])
                elif exchange.is_result(reply):
                    return reply
        except (EOFError, OSError) as exc:
            self.close()
            raise exchange.lost(exc) from None

    def _await_frame(self, exchange: Exchange, silence_limit: float, waiting: Waiting | None) -> None:
        """Until the engine's next frame can be read, looking at its pulse between slices. A silent
        engine is left running (its supervisor decides); the request fails as EngineSilent. A
        beating one is waited for past `silence_limit` only while it says the request is in its
        line (the engine stops every handler over its budget itself)."""
        since = time.monotonic()
        look = min(PULSE_LOOK_SECONDS if self.pulses is not None else silence_limit, silence_limit)
        with waiting() if waiting is not None else contextlib.nullcontext():   # entered once: it may queue
            while not self.readable.poll(look * 1000):
                stopped = self.pulses is not None and self.address is not None and self.pulses.silent(self.address)
                if not stopped and (time.monotonic() - since < silence_limit or exchange.queued):
                    continue
                if self.owned:   # a private engine is ours alone: nobody else would end it
                    self.stop_engine()
                    raise EngineDown(CrashKind.WEDGED.value)
                down = silent_down(exchange, self.conn.fileno())
                self.close()
                raise down

    @staticmethod
    def _answer(call: JsonObject, on_host: HostHandler | None, waiting: Waiting | None,
                exchange: Exchange) -> JsonObject:
        if on_host is None:
            return {"ok": False, "error": "no host here"}
        if waiting is None:
            return on_host(call)
        with waiting():   # host calls mostly wait on I/O (fetch, LLM, SSH)
            answer = on_host(call)
            done = time.monotonic()
        exchange.hold(call.get("handler"), time.monotonic() - done)   # the place taken again: the hub's wait
        return answer

    def alive(self) -> bool:
        """Whether the engine process this link reached still runs (an exited one is replaced on the
        same socket, and a request on this link would be lost before it started)."""
        if not self.pid:
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:   # another user's process took the pid: ours is gone
            return False
        return True

    def stop_engine(self) -> None:
        """A private engine of this process silent past every budget is beyond saving: end it."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.close()

    def close(self) -> None:
        self.conn.close()


class PrivateEngine:
    """An engine of this process's own over a socket pair: for a chain started from inside another
    chain's host call, which must not wait on an engine its own caller holds."""

    def __init__(self, env: dict[str, str], memory_mb: int):
        parent, child = socket.socketpair()
        fd = child.detach()
        # No spare isolate: a private engine serves one short nested chain at a time.
        self.proc = EngineArgs(memory_mb, conn=fd, spare=False).start(env)
        os.close(fd)
        self.link = EngineLink(wire.Frames(parent.detach()), self.proc.pid, owned=True)
        try:
            if not self.link.readable.poll(CONNECT_TIMEOUT_SECONDS * 1000):
                raise EOFError("no READY")
            ready = wire.loads(self.link.conn.recv_bytes()).get("op") == Op.READY.value
        except (EOFError, OSError):   # it died starting (or never started): down, like any engine
            ready = False
        if not ready:
            self.kill()
            raise EngineDown()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.link.close()


class PoolExhausted(RuntimeError):
    """Chains nested inside host calls need more private engines than the cap allows."""


class Tier:
    """Routes each chain to an engine: the account's preferred one (its compartments are warm
    there), the next one when that is busy, and the lane's when its installations are suspect or
    its own chain is what keeps an engine busy."""

    def __init__(self, engines: list[str], lane: list[str], private_env: dict[str, str] | None = None,
                 waiting: Waiting | None = None, isolate_memory_mb: int = DEFAULT_ISOLATE_MEMORY_MB,
                 compilers: list[str] | None = None):
        self.engines = engines
        self.compilers = compilers or engines
        self.isolate_memory_mb = isolate_memory_mb   # a private engine's, as the machine's engines have
        self.waiting = waiting   # lets the web process give this thread's CPU turn away meanwhile
        self.lane = lane or engines
        self.private_env = private_env if private_env is not None else dict(os.environ)
        self._local = threading.local()
        self._private_lock = threading.Lock()
        self._private_idle: list[PrivateEngine] = []
        self.private_count = 0
        self.shipped = ShippedCode()   # shared with an AsyncTier made like() this one
        self.pulses = Pulses()         # the engines' pulses: which of them stopped answering

    # -- code shipping -------------------------------------------------------------------------
    def unsent(self, account_key: str, handlers: list[tuple[str, str]]) -> list[str]:
        """The installation ids whose code (at that hash) this process has not sent yet."""
        return self.shipped.unsent(account_key, handlers)

    def mark_shipped(self, account_key: str, handlers: list[tuple[str, str]]) -> None:
        self.shipped.mark(account_key, handlers)

    # -- links ---------------------------------------------------------------------------------
    def _link(self, address: str) -> EngineLink:
        links = getattr(self._local, "links", None)
        if links is None:
            links = self._local.links = {}
        link = links.get(address)
        if link is not None and not link.alive():   # found stale before use: a fresh link, no call lost
            link.close()
            link = None
        if link is None:
            link = links[address] = EngineLink.connect(address, self.pulses)
        return link

    def _forget(self, address: str) -> None:
        getattr(self._local, "links", {}).pop(address, None)

    @property
    def addresses(self) -> list[str]:
        """Every engine this tier reaches, the shared ones first, each once (the lane may be the
        shared engines themselves)."""
        return list(dict.fromkeys(self.engines + self.lane))

    def order(self, account_key: str, lane: bool = False) -> list[str]:
        return preferred_order(self.lane if lane else self.engines, account_key)

    # -- requests --------------------------------------------------------------------------------
    def request(self, account_key: str, message: Mapping[str, Any], on_host: HostHandler | None = None,
                on_slow: SlowHandler | None = None, lane: bool = False,
                silence_limit: float = 30.0) -> JsonObject:
        if getattr(self._local, "depth", 0):
            return self._nested(message, on_host, on_slow, silence_limit)
        self._local.depth = 1
        try:
            return self._route(account_key, message, on_host, on_slow, lane, silence_limit)
        finally:
            self._local.depth = 0

    @contextlib.contextmanager
    def nested(self) -> Iterator[None]:
        """Chains this thread runs meanwhile are nested in a host call of a chain running elsewhere
        (an async tier's, answered on this thread): they go to private engines, as request() sends
        those of a host call it answers itself."""
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth

    def _route(self, account_key: str, message: Mapping[str, Any], on_host: HostHandler | None,
               on_slow: SlowHandler | None, lane: bool, silence_limit: float) -> JsonObject:
        """route()'s plan over the engines that beat; a request an engine fell silent on before it
        started is planned once more, without that engine."""
        for attempt in range(2):
            silent, starting = self.pulses.unready(self.addresses, fresh=attempt > 0)
            plan = route(self.engines, self.lane, account_key, message, lane, silent=silent, starting=starting)
            try:
                address, sending = next(plan)
                while True:
                    address, sending = plan.send(self._send(address, sending, on_host, on_slow, silence_limit))
            except StopIteration as done:
                reply: JsonObject = done.value
                return reply
            except EngineSilent as down:
                if down.started or attempt:
                    raise
        raise AssertionError("unreachable")

    def _send(self, address: str, message: Mapping[str, Any], on_host: HostHandler | None,
              on_slow: SlowHandler | None, silence_limit: float) -> JsonObject:
        """One request on this thread's link to `address`. An engine that died before the request
        started (killed while it waited in line, or before it read it) ran none of it: the request
        goes once more on a fresh connection, which the replacement engine accepts on the same socket.
        A second such death, or no listener at all, is EngineUnavailable."""
        for attempt in range(2):
            try:
                link = self._link(address)
                return link.request(message, on_host, on_slow, silence_limit, self.waiting)
            except EngineDown as down:
                self._forget(address)
                check_resend(down, attempt)
        raise AssertionError("unreachable")

    def _nested(self, message: Mapping[str, Any], on_host: HostHandler | None, on_slow: SlowHandler | None,
                silence_limit: float) -> JsonObject:
        engine = self._take_private()
        killed = False
        depth = self._local.depth
        self._local.depth = depth + 1
        try:
            return engine.link.request(message, on_host, on_slow, silence_limit, self.waiting)
        except EngineDown:
            engine.kill()
            killed = True
            with self._private_lock:   # its place is free again: without this, 8 deaths exhaust the pool
                self.private_count -= 1
            raise
        finally:
            self._local.depth = depth
            if not killed:
                self._give_back(engine)

    def _take_private(self) -> PrivateEngine:
        with self._private_lock:
            if self._private_idle:
                return self._private_idle.pop()
            if self.private_count >= MAX_PRIVATE_ENGINES:
                raise PoolExhausted(f"all {MAX_PRIVATE_ENGINES} engines for nested chains are busy")
            self.private_count += 1
        try:
            return PrivateEngine(self.private_env, self.isolate_memory_mb)
        except BaseException:
            with self._private_lock:
                self.private_count -= 1
            raise

    def _give_back(self, engine: PrivateEngine) -> None:
        with self._private_lock:
            if len(self._private_idle) < 1:
                self._private_idle.append(engine)
                return
            self.private_count -= 1
        engine.kill()

    # -- other requests ---------------------------------------------------------------------------
    def compile(self, source: str, language: str, typecheck: bool = False, account: str = "") -> JsonObject:
        """{errors} ("stage": "types" when the source transpiles but does not type-check), the compiled
        plugin, or {busy} when the compile engine gave it no turn (`account` is whose turn it takes)."""
        request = {"op": Op.COMPILE.value, "source": source, "language": language, "typecheck": typecheck,
                   "account": account}
        for attempt in range(2):
            try:
                return self._send(self.compilers[attempt % len(self.compilers)], request, None, None, 60)
            except EngineDown:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def unload(self, account_key: str, ids: list[str]) -> int:
        """Tells every engine (shared and lane) to drop these installations' compartments and code;
        how many compartments were dropped. An engine that is down holds nothing of them any more."""
        dropped = 0
        for address in self.addresses:
            with contextlib.suppress(EngineDown):
                reply = self._send(address, {"op": Op.UNLOAD.value, "account": account_key, "ids": ids}, None, None, 10)
                dropped += int(reply.get("unloaded") or 0)
        return dropped

    def ping(self, address: str) -> JsonObject:
        return self._send(address, {"op": Op.PING.value}, None, None, 10)

    def shutdown(self) -> None:
        for link in getattr(self._local, "links", {}).values():
            link.close()
        self._local.links = {}
        with self._private_lock:
            idle, self._private_idle = self._private_idle, []
        for engine in idle:
            engine.kill()


def tier_for(layout: TierLayout, private_env: dict[str, str] | None = None) -> Tier:
    """A tier over a supervisor's engines (engine/supervisor.py's describe())."""
    return Tier(layout["engines"], layout["lane"], private_env, isolate_memory_mb=layout["isolateMemoryMb"],
                compilers=layout.get("compilers"))


def tier_from_directory(directory: str | Path) -> Tier:
    """The tier a supervisor in another process serves: its sockets, read from the tier.json it wrote."""
    layout: TierLayout = json.loads((Path(directory) / "tier.json").read_text())
    return tier_for(layout)

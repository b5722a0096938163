"""The web side of the engine tier for asyncio: Tier's routing and fault semantics (tier.py), with no
thread held while a call waits on its engine or on a host call.

A connection carries one request at a time (the protocol's rule), so each event loop keeps a pool of
idle connections per engine: a request takes one (or opens one), and gives it back once answered; a
connection whose request did not end cleanly (lost, wedged, cancelled) is closed, never reused.
Every connect and every read has a limit. Chains nested inside a host call are not this tier's: a
host member that runs one does so on a thread, through the sync Tier's private engines
(`Tier.nested()`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from plugins_app.runtime import wire
from plugins_app.runtime.protocol import JsonObject, Op
from plugins_app.runtime.pulse import Pulses
from plugins_app.runtime.web.tier import (
    CONNECT_TIMEOUT_SECONDS,
    PULSE_LOOK_SECONDS,
    EngineDown,
    EngineSilent,
    EngineUnavailable,
    Exchange,
    ShippedCode,
    Tier,
    check_resend,
    host_reply,
    preferred_order,
    route,
    silent_down,
)

DEFAULT_MAX_IDLE = 32          # idle connections kept per engine and event loop; more are closed when given back
READ_LIMIT = 1024 * 1024       # the stream's buffer before it stops reading (frames of any size are read whole)
CONNECT_RETRY_SECONDS = 0.01   # a full listen backlog (an engine being replaced) is asked again after this

AsyncHostHandler = Callable[[JsonObject], Awaitable[JsonObject]]   # a HOST message in, its {"ok", "value"/"error"} out
AsyncSlowHandler = Callable[[str], Awaitable[None]]
AsyncWaiting = Callable[[], AbstractAsyncContextManager[None]]   # entered around each wait for the engine


class AsyncFrames:
    """wire.py's frames over an asyncio unix stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sock: socket.socket):
        self.reader = reader
        self.writer = writer
        self.sock = sock   # kept to close it even when its event loop is gone
        self._header: bytes | None = None   # a frame's header read by a recv cut short before its body

    async def recv(self) -> bytes:
        """The next frame; EOFError once the other end has closed (an OSError when it reset).
        A recv cut short (a timeout between pulse looks) loses nothing: readexactly takes bytes
        only once it has them all, and a header already taken is kept for the next recv."""
        try:
            if self._header is None:
                self._header = await self.reader.readexactly(wire.HEADER_SIZE)
            body = await self.reader.readexactly(wire.frame_length(self._header))
        except asyncio.IncompleteReadError:
            raise EOFError from None
        self._header = None
        return body

    def send(self, data: bytes) -> None:
        """Queues one whole frame (frames never interleave: the transport writes them in order)."""
        if self.writer.is_closing():
            raise BrokenPipeError("the connection is closed")
        self.writer.write(wire.frame(data))

    def pending(self) -> int:
        """Bytes written but not yet taken by the socket."""
        return self.writer.transport.get_write_buffer_size()

    async def drain(self) -> None:
        await self.writer.drain()

    @property
    def closed(self) -> bool:
        return self.writer.is_closing() or self.reader.at_eof() or self.reader.exception() is not None

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):   # its loop may be closed already
            self.writer.close()
        self.sock.close()


async def _connect_unix(address: str, timeout: float) -> socket.socket:
    """A connected unix socket. A full listen backlog (an engine being replaced while many connect)
    makes a non-blocking connect fail with EAGAIN, with nothing in progress: it is asked again."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        while True:
            try:
                sock.connect(address)
                return sock
            except (BlockingIOError, InterruptedError):
                if loop.time() >= deadline:
                    raise TimeoutError(f"{address}: the engine's backlog stayed full") from None
                await asyncio.sleep(CONNECT_RETRY_SECONDS)
    except BaseException:
        sock.close()
        raise


class AsyncEngineLink:
    """One connection to one engine, used by one request at a time, on one event loop. As the
    sync link, it never ends an engine: one whose pulse stops is only stopped waiting for."""

    def __init__(self, frames: AsyncFrames, pid: int | None = None, *, address: str | None = None,
                 pulses: Pulses | None = None):
        self.frames = frames
        self.pid = pid
        self.address, self.pulses = address, pulses
        self.next_id = 0

    @classmethod
    async def connect(cls, address: str, timeout: float = CONNECT_TIMEOUT_SECONDS,
                      pulses: Pulses | None = None) -> AsyncEngineLink:
        try:
            sock = await _connect_unix(address, timeout)
        except OSError:   # no one listens there (the supervisor is gone), or never got in: the engine is down
            raise EngineUnavailable() from None
        try:
            reader, writer = await asyncio.open_unix_connection(sock=sock, limit=READ_LIMIT)
        except BaseException:
            sock.close()
            raise
        link = cls(AsyncFrames(reader, writer, sock), address=address, pulses=pulses)
        try:
            link.pid = (await link.request({"op": Op.PING.value}, silence_limit=timeout)).get("pid")
        except EngineSilent:   # in the backlog of an engine that stopped: nothing ran
            link.close()
            raise EngineSilent(started=False) from None
        except EngineDown:   # accepted by an engine that died (or never answered) before it answered: nothing ran
            link.close()
            raise EngineDown(started=False) from None
        return link

    async def request(self, message: Mapping[str, Any], on_host: AsyncHostHandler | None = None,
                      on_slow: AsyncSlowHandler | None = None, silence_limit: float = 30.0,
                      waiting: AsyncWaiting | None = None) -> JsonObject:
        """Send one request; answer its host calls (each as it comes, concurrently) until its result
        arrives. An engine whose pulse stops fails the request as EngineSilent at once; one that
        beats is waited for past `silence_limit` (counted while no host call of ours is
        outstanding, as the sync link, which does not read while it answers one) only while it says
        the request waits in its line. Either way the engine is left alone: its supervisor decides.
        On any end but the result, the connection is closed."""
        self.next_id += 1
        message = dict(message, id=self.next_id)
        exchange = Exchange(self.next_id)
        loop = asyncio.get_running_loop()
        hosts: set[asyncio.Task[None]] = set()
        reading: asyncio.Task[bytes] | None = None
        clean = False
        try:
            self.frames.send(wire.dumps(message))
            if self.frames.pending():   # a large request (code being shipped) fills the socket's buffer
                try:
                    async with asyncio.timeout(silence_limit):
                        await self.frames.drain()
                except TimeoutError:   # the engine reads nothing: it never had the whole request
                    raise EngineSilent(started=False) from None
            exchange.sent = True
            while True:
                if reading is None and not hosts:
                    # The usual case: nothing of ours outstanding, so the read alone is awaited.
                    raw = await self._read(exchange, silence_limit, waiting)
                else:
                    if reading is None:
                        reading = loop.create_task(self.frames.recv())
                    if not await self._wait(exchange, reading, hosts, silence_limit, waiting):
                        continue
                    raw, reading = reading.result(), None
                reply: JsonObject = wire.loads(raw)
                if await self._heard(reply, exchange, hosts, on_host, on_slow, silence_limit):
                    # A call the chain fired without awaiting is still answered, as the sync link
                    # answers every host call it read before the result.
                    if hosts:
                        await asyncio.gather(*hosts)
                        hosts.clear()
                    clean = True
                    return reply
        except (EOFError, OSError) as exc:
            raise exchange.lost(exc) from None
        finally:
            if not clean:
                if reading is not None:
                    reading.cancel()
                for task in hosts:
                    task.cancel()
                self.close()

    async def _read(self, exchange: Exchange, silence_limit: float, waiting: AsyncWaiting | None) -> bytes:
        async with waiting() if waiting is not None else contextlib.nullcontext():
            since = asyncio.get_running_loop().time()
            while True:
                try:   # recv loses nothing when cut short (AsyncFrames.recv)
                    async with asyncio.timeout(self._look(silence_limit)):
                        return await self.frames.recv()
                except TimeoutError:
                    self._check(exchange, since, silence_limit, counting=True)

    def _look(self, silence_limit: float) -> float:
        return min(PULSE_LOOK_SECONDS, silence_limit) if self.pulses is not None else silence_limit

    def _check(self, exchange: Exchange, since: float, silence_limit: float, *, counting: bool) -> None:
        """Between slices of a wait: raises EngineSilent when the engine's pulse stopped, or when it
        beats but left this request unanswered past `silence_limit` (counting) without saying it
        waits in line."""
        if self.pulses is not None and self.address is not None and self.pulses.silent(self.address):
            raise silent_down(exchange, self.frames.sock.fileno())
        quiet = asyncio.get_running_loop().time() - since
        if counting and quiet >= silence_limit and not exchange.queued:
            raise silent_down(exchange, self.frames.sock.fileno())

    async def _wait(self, exchange: Exchange, reading: asyncio.Task[bytes], hosts: set[asyncio.Task[None]],
                    silence_limit: float, waiting: AsyncWaiting | None) -> bool:
        """Until the next frame is read (True) or a host call is answered (False)."""
        waits: set[asyncio.Task[Any]] = {reading, *hosts}
        async with waiting() if waiting is not None else contextlib.nullcontext():
            since = asyncio.get_running_loop().time()
            while True:
                done, _ = await asyncio.wait(waits, timeout=self._look(silence_limit),
                                             return_when=asyncio.FIRST_COMPLETED)
                if done:
                    break
                # A host call of ours outstanding is our wait, not the engine's silence: only the pulse counts then.
                self._check(exchange, since, silence_limit, counting=not hosts)
        for task in done & hosts:
            hosts.discard(task)
            task.result()   # a host handler's bug is the caller's to see
        return reading in done

    async def _heard(self, reply: JsonObject, exchange: Exchange, hosts: set[asyncio.Task[None]],
                     on_host: AsyncHostHandler | None, on_slow: AsyncSlowHandler | None, silence_limit: float) -> bool:
        """Acts on one frame from the engine; True when it is the request's result."""
        exchange.note(reply)
        op = reply.get("op")
        if op == Op.HOST.value:
            stray = exchange.stray_host_call(reply)
            if stray is not None:
                self.frames.send(host_reply(reply, stray))
            else:
                hosts.add(asyncio.get_running_loop().create_task(self._answer(reply, on_host, silence_limit)))
        elif op == Op.SLOW.value:
            if on_slow is not None:
                await on_slow(reply["handler"])
        else:
            return exchange.is_result(reply)
        return False

    async def _answer(self, call: JsonObject, on_host: AsyncHostHandler | None, silence_limit: float) -> None:
        answer = {"ok": False, "error": "no host here"} if on_host is None else await on_host(call)
        with contextlib.suppress(OSError):   # the engine is gone: the read says so
            self.frames.send(host_reply(call, answer))
            if self.frames.pending():
                try:
                    async with asyncio.timeout(silence_limit):
                        await self.frames.drain()
                except TimeoutError:   # the engine takes nothing from us any more: the read ends with this
                    self.close()

    def alive(self) -> bool:
        """Whether this connection may carry another request: open, and the engine process it
        reached still runs (an exited one is replaced on the same socket)."""
        if self.frames.closed:
            return False
        if not self.pid:
            return True
        try:
            os.kill(self.pid, 0)
        except (ProcessLookupError, PermissionError):   # gone, or another user's process took the pid
            return False
        return True

    def close(self) -> None:
        self.frames.close()


class AsyncTier:
    """Routes each chain to an engine as Tier does (route() in tier.py), over pooled asyncio
    connections: the account's preferred engine, the next one when that is busy, the lane when its
    own chain keeps an engine busy, and a wait at the preferred one when all are busy."""

    def __init__(self, engines: list[str], lane: list[str], *, compilers: list[str] | None = None,
                 shipped: ShippedCode | None = None, max_idle: int = DEFAULT_MAX_IDLE,
                 connect_timeout: float = CONNECT_TIMEOUT_SECONDS, waiting: AsyncWaiting | None = None,
                 pulses: Pulses | None = None):
        self.engines = engines
        self.lane = lane or engines
        self.compilers = compilers or engines
        self.shipped = shipped if shipped is not None else ShippedCode()
        self.pulses = pulses if pulses is not None else Pulses()   # which engines stopped answering
        self.max_idle = max_idle
        self.connect_timeout = connect_timeout
        self.waiting = waiting   # lets the caller give its admission place away while it waits
        self._pools: dict[asyncio.AbstractEventLoop, dict[str, list[AsyncEngineLink]]] = {}
        self._pools_lock = threading.Lock()

    @classmethod
    def like(cls, tier: Tier, **kwargs: Any) -> AsyncTier:
        """An async tier over `tier`'s engines, sharing its book of code already shipped."""
        return cls(tier.engines, tier.lane, compilers=tier.compilers, shipped=tier.shipped, pulses=tier.pulses,
                   **kwargs)

    # -- code shipping -------------------------------------------------------------------------
    def unsent(self, account_key: str, handlers: list[tuple[str, str]]) -> list[str]:
        return self.shipped.unsent(account_key, handlers)

    def mark_shipped(self, account_key: str, handlers: list[tuple[str, str]]) -> None:
        self.shipped.mark(account_key, handlers)

    # -- connections ---------------------------------------------------------------------------
    def _pool(self, address: str) -> list[AsyncEngineLink]:
        loop = asyncio.get_running_loop()
        pools = self._pools.get(loop)
        if pools is None:
            with self._pools_lock:
                for other in [other for other in self._pools if other.is_closed()]:
                    for link in (link for idle in self._pools.pop(other).values() for link in idle):
                        link.close()
                pools = self._pools.setdefault(loop, {})
        return pools.setdefault(address, [])

    async def _take(self, address: str, fresh: bool = False) -> AsyncEngineLink:
        idle = self._pool(address)
        while idle and not fresh:
            link = idle.pop()   # the most recently used: the least likely to have gone stale
            if link.alive():
                return link
            link.close()   # found stale before use: a fresh link, no call lost
        return await AsyncEngineLink.connect(address, self.connect_timeout, self.pulses)

    def _give_back(self, address: str, link: AsyncEngineLink) -> None:
        idle = self._pool(address)
        if len(idle) < self.max_idle and link.alive():
            idle.append(link)
        else:
            link.close()

    def _drop_idle(self, address: str) -> None:
        idle = self._pool(address)
        while idle:
            idle.pop().close()

    def idle(self, address: str) -> int:
        """How many idle connections to `address` this event loop keeps."""
        return len(self._pool(address))

    @property
    def addresses(self) -> list[str]:
        return list(dict.fromkeys(self.engines + self.lane))

    def order(self, account_key: str, lane: bool = False) -> list[str]:
        return preferred_order(self.lane if lane else self.engines, account_key)

    # -- requests --------------------------------------------------------------------------------
    async def request(self, account_key: str, message: Mapping[str, Any], on_host: AsyncHostHandler | None = None,
                      on_slow: AsyncSlowHandler | None = None, lane: bool = False,
                      silence_limit: float = 30.0) -> JsonObject:
        """As Tier._route: engines whose pulse stopped are passed over, and a request one of them
        fell silent on before it started is planned once more without it."""
        for attempt in range(2):
            silent, starting = self.pulses.unready(self.addresses, fresh=attempt > 0)
            plan = route(self.engines, self.lane, account_key, message, lane, silent=silent, starting=starting)
            try:
                address, sending = next(plan)
                while True:
                    reply = await self._send(address, sending, on_host, on_slow, silence_limit)
                    address, sending = plan.send(reply)
            except StopIteration as done:
                result: JsonObject = done.value
                return result
            except EngineSilent as down:
                if down.started or attempt:
                    raise
        raise AssertionError("unreachable")

    async def _send(self, address: str, message: Mapping[str, Any], on_host: AsyncHostHandler | None,
                    on_slow: AsyncSlowHandler | None, silence_limit: float) -> JsonObject:
        """One request on a pooled connection to `address`; sent once more on a fresh connection
        when its engine died before its chain started (Tier._send's rule, check_resend)."""
        for attempt in range(2):
            try:
                link = await self._take(address, fresh=attempt > 0)
                reply = await link.request(message, on_host, on_slow, silence_limit, self.waiting)
            except EngineDown as down:
                # Its idle fellows most likely reached the same dead engine: none is used again.
                self._drop_idle(address)
                check_resend(down, attempt)
                continue
            self._give_back(address, link)
            return reply
        raise AssertionError("unreachable")

    # -- other requests ---------------------------------------------------------------------------
    async def compile(self, source: str, language: str, typecheck: bool = False) -> JsonObject:
        """As Tier.compile: {errors} or the compiled plugin."""
        request = {"op": Op.COMPILE.value, "source": source, "language": language, "typecheck": typecheck}
        for attempt in range(2):
            try:
                return await self._send(self.compilers[attempt % len(self.compilers)], request, None, None, 60)
            except EngineDown:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def unload(self, account_key: str, ids: list[str]) -> int:
        dropped = 0
        for address in self.addresses:
            with contextlib.suppress(EngineDown):
                reply = await self._send(address, {"op": Op.UNLOAD.value, "account": account_key, "ids": ids},
                                         None, None, 10)
                dropped += int(reply.get("unloaded") or 0)
        return dropped

    async def ping(self, address: str) -> JsonObject:
        return await self._send(address, {"op": Op.PING.value}, None, None, 10)

    async def aclose(self) -> None:
        """Closes this event loop's idle connections (call before the loop ends)."""
        with self._pools_lock:
            pools = self._pools.pop(asyncio.get_running_loop(), {})
        for link in (link for idle in pools.values() for link in idle):
            link.close()


@contextlib.asynccontextmanager
async def closing(tier: AsyncTier) -> AsyncIterator[AsyncTier]:
    """`tier`, its connections on this loop closed at the end."""
    try:
        yield tier
    finally:
        await tier.aclose()

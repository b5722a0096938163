"""The web side of the engine tier: connections to the machine's engines, and where a chain goes."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from plugins_app.runtime import wire
from plugins_app.runtime.config import DEFAULT_ISOLATE_MEMORY_MB
from plugins_app.runtime.launch import EngineArgs
from plugins_app.runtime.protocol import CrashKind, JsonObject, Op, TierLayout

CONNECT_TIMEOUT_SECONDS = 30.0
MAX_PRIVATE_ENGINES = 8
MAX_SHIPPED = 100_000   # (account, installation, hash) this process remembers having sent

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


class EngineLink:
    """One connection to one engine, used by one thread at a time."""

    def __init__(self, conn: wire.Frames, pid: int | None = None):
        self.conn = conn
        self.pid = pid
        self.readable = select.poll()   # made once: Connection.poll builds a selector per call
        self.readable.register(conn.fileno(), select.POLLIN)
        self.next_id = 0

    @classmethod
    def connect(cls, address: str) -> EngineLink:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_TIMEOUT_SECONDS)
        try:
            sock.connect(address)   # an engine being replaced leaves this in the listen backlog
        except OSError:   # no one listens there (the supervisor is gone): the engine is down, not a bug
            sock.close()
            raise EngineUnavailable() from None
        sock.settimeout(None)
        link = cls(wire.Frames(sock.detach()))
        try:
            link.pid = link.request({"op": Op.PING.value}, silence_limit=CONNECT_TIMEOUT_SECONDS).get("pid")
        except EngineDown:   # accepted by an engine that died before it answered: nothing ran
            raise EngineDown(started=False) from None
        return link

    def request(self, message: Mapping[str, Any], on_host: HostHandler | None = None,
                on_slow: SlowHandler | None = None, silence_limit: float = 30.0,
                waiting: Waiting | None = None) -> JsonObject:
        """Send one request; answer its host calls until the result arrives."""
        self.next_id += 1
        message = dict(message, id=self.next_id)
        # queued: the engine said the request waits in line, and has not said it started since;
        # heard: any frame of this request came back (it was read, at least).
        sent = queued = heard = False
        try:
            self.conn.send_bytes(wire.dumps(message))
            sent = True
            while True:
                if self.conn.has_frame():
                    ready = True
                elif waiting is None:
                    ready = bool(self.readable.poll(silence_limit * 1000))
                else:
                    with waiting():
                        ready = bool(self.readable.poll(silence_limit * 1000))
                if not ready:
                    self.stop_engine()
                    raise EngineDown(CrashKind.WEDGED.value)
                reply: JsonObject = wire.loads(self.conn.recv_bytes())
                op = reply.get("op")
                heard = True
                if op == Op.QUEUED.value:
                    queued = True
                elif op == Op.STARTED.value:
                    queued = False
                elif op == Op.HOST.value:
                    if reply.get("id") != message["id"]:
                        # From a chain answered before its handler's unawaited call reached us.
                        answer = {"ok": False, "error": f"host.{reply.get('member')}: the chain that called it is over"}
                    elif on_host is None:
                        answer = {"ok": False, "error": "no host here"}
                    elif waiting is None:
                        answer = on_host(reply)
                    else:
                        with waiting():   # host calls mostly wait on I/O (fetch, LLM, SSH)
                            answer = on_host(reply)
                    self.conn.send_bytes(wire.dumps({"op": Op.HOST_REPLY.value, "call": reply["call"], **answer}))
                elif op == Op.SLOW.value:
                    if on_slow is not None:
                        on_slow(reply["handler"])
                elif reply.get("id") == message["id"]:
                    return reply
        except (EOFError, OSError) as exc:
            self.close()
            # Not started: never sent; waiting in the engine's line; or never read: an engine that
            # dies with bytes of ours unread resets the connection (ECONNRESET) instead of closing it
            # (EOF), and with nothing heard back those bytes can only be the request itself. A chain
            # started the moment it arrived says nothing, and its engine's death is a clean EOF.
            unread = isinstance(exc, ConnectionResetError) and not heard
            raise EngineDown(started=sent and not queued and not unread) from None

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
        """An engine silent past every budget is beyond saving: end it (its supervisor starts another)."""
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
        self.link = EngineLink(wire.Frames(parent.detach()), self.proc.pid)
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
        self._shipped: OrderedDict[tuple[str, str, str], None] = OrderedDict()   # (account, id, hash) sent to an engine
        self._shipped_lock = threading.Lock()

    # -- code shipping -------------------------------------------------------------------------
    def unsent(self, account_key: str, handlers: list[tuple[str, str]]) -> list[str]:
        """The installation ids whose code (at that hash) this process has not sent yet."""
        with self._shipped_lock:
            return [i for i, h in handlers if (account_key, i, h) not in self._shipped]

    def mark_shipped(self, account_key: str, handlers: list[tuple[str, str]]) -> None:
        with self._shipped_lock:
            for i, h in handlers:
                self._shipped[(account_key, i, h)] = None
            while len(self._shipped) > MAX_SHIPPED:
                self._shipped.popitem(last=False)

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
            link = links[address] = EngineLink.connect(address)
        return link

    def _forget(self, address: str) -> None:
        getattr(self._local, "links", {}).pop(address, None)

    @property
    def addresses(self) -> list[str]:
        """Every engine this tier reaches, the shared ones first, each once (the lane may be the
        shared engines themselves)."""
        return list(dict.fromkeys(self.engines + self.lane))

    def order(self, account_key: str, lane: bool = False) -> list[str]:
        addresses = self.lane if lane else self.engines
        first = zlib.crc32(account_key.encode()) % len(addresses)
        return [addresses[(first + i) % len(addresses)] for i in range(len(addresses))]

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

    def _route(self, account_key: str, message: Mapping[str, Any], on_host: HostHandler | None,
               on_slow: SlowHandler | None, lane: bool, silence_limit: float,
               wait_at: str | None = None) -> JsonObject:
        order = self.order(account_key, lane)
        for address in order:
            reply = self._send(address, message, on_host, on_slow, silence_limit)
            if not reply.get("busy") or reply.get("holder"):
                return reply   # a holder: the caller leaves that handler out and asks again
            if reply.get("lane") and not lane:
                # This account's own chain keeps that engine busy (or, `elsewhere`, another shared
                # engine): don't spread it to the others. If the lane is busy too, wait behind that
                # chain of its own, which its engine stops waiting on once it holds the isolate too
                # long; when it runs elsewhere, wait in the lane, never in another account's line.
                return self._route(account_key, message, on_host, on_slow, True, silence_limit,
                                   wait_at=None if reply.get("elsewhere") else address)
        # Everything is busy: wait in line where this account is warm.
        return self._send(wait_at or order[0], dict(message, wait=True), on_host, on_slow, silence_limit)

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
                if down.started or isinstance(down, EngineUnavailable):
                    raise
                if attempt:
                    raise EngineUnavailable() from None
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
    def compile(self, source: str, language: str, typecheck: bool = False) -> JsonObject:
        """{errors} ("stage": "types" when the source transpiles but does not type-check) or the compiled plugin."""
        request = {"op": Op.COMPILE.value, "source": source, "language": language, "typecheck": typecheck}
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

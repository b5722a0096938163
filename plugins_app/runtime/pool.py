"""Parent side of the engine processes: spawns, supervises, replaces and hands them out."""

from __future__ import annotations

import json
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
import zlib
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable

from . import wire

logger = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 30.0


class EngineCrashed(Exception):
    """The engine process died or had to be killed; `kind` says why (stuck, memory, crashed)."""

    def __init__(self, kind: str, index: int | None = None):
        super().__init__(kind)
        self.kind = kind
        self.index = index


HostHandler = Callable[[dict], dict]


class EngineProcess:
    def __init__(self, memory_mb: int, max_isolates: int, limits: dict):
        self.env = dict(os.environ, HUB_ISOLATE_MEMORY_MB=str(memory_mb),
                        HUB_ENGINE_MAX_ISOLATES=str(max_isolates), HUB_ENGINE_LIMITS=json.dumps(limits))
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.readable: select.poll | None = None   # made once: Connection.poll builds a selector per call
        self.next_id = 0
        self.restarts = 0

    def start(self) -> None:
        parent_sock, child_sock = socket.socketpair()
        child_fd = child_sock.detach()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "plugins_app.runtime.engine_process", str(child_fd)],
            pass_fds=[child_fd], cwd=PROJECT_ROOT, env=self.env)
        os.close(child_fd)
        self.conn = Connection(parent_sock.detach())
        self.readable = select.poll()
        self.readable.register(self.conn.fileno(), select.POLLIN)
        if not self._wait(START_TIMEOUT_SECONDS):
            self.kill()
            raise EngineCrashed("crashed")
        hello = json.loads(self.conn.recv_bytes())
        assert hello.get("op") == "ready", hello

    def _wait(self, seconds: float) -> bool:
        """True once the engine has written (or hung up), False after `seconds` of silence."""
        return bool(self.readable.poll(seconds * 1000))

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
                pass
        if self.conn is not None:
            self.conn.close()
        self.proc, self.conn, self.readable = None, None, None

    def restart(self) -> None:
        self.kill()
        self.restarts += 1
        self.start()

    def request(self, message: dict, on_host: HostHandler | None = None,
                silence_limit: float = 30.0) -> dict:
        """Send one request; answer its host calls until the result arrives."""
        if not self.alive:
            self.start()
        self.next_id += 1
        message = dict(message, id=self.next_id)
        try:
            self.conn.send_bytes(wire.dumps(message))
            while True:
                if not self._wait(silence_limit):
                    self.kill()
                    raise EngineCrashed("stuck")
                reply = wire.loads(self.conn.recv_bytes())
                if reply.get("op") == "host":
                    answer = on_host(reply) if on_host else {"ok": False, "error": "no host here"}
                    self.conn.send_bytes(wire.dumps({"op": "hostReply", "call": reply["call"], **answer}))
                    continue
                if reply.get("fatal"):
                    self.kill()
                    raise EngineCrashed(reply["fatal"], reply.get("index"))
                if reply.get("restart"):
                    self.kill()   # the engine exits after this reply; don't race it
                return reply
        except (EOFError, OSError, BrokenPipeError):
            self.kill()
            raise EngineCrashed("crashed") from None


class PoolExhausted(RuntimeError):
    """A nested chain needed an engine and the pool is at its cap."""


class EnginePool:
    """A few engine processes; an account prefers one (its isolate is warm there).

    A chain may run another chain from inside a host call (host.session.peer.send) while its own
    engine stays locked. Waiting for an engine there could wait on the caller itself, so a thread
    that already holds an engine never waits: it gets a temporary extra engine (up to
    `max_engines` in all), killed when the nested chain is done."""

    def __init__(self, size: int = 2, memory_mb: int = 128, max_isolates: int = 32,
                 limits: dict | None = None, max_engines: int = 8):
        limits = limits or {"maxReason": 500, "maxValueChars": 1024 * 1024, "maxLogs": 100,
                            "maxLogChars": 2000}
        self._engine_args = (memory_mb, max_isolates, limits)
        self.engines = [EngineProcess(*self._engine_args) for _ in range(max(1, size))]
        self.max_engines = max(max_engines, len(self.engines))
        self.extras = 0
        self._extras_lock = threading.Lock()
        self._held = threading.local()
        self.suspects: set[tuple[str, str]] = set()   # (installation id, code hash) that wedged an engine
        self._suspects_lock = threading.Lock()

    @contextmanager
    def engine_for(self, account_key: str):
        engine, temporary = self._acquire(account_key)
        self._held.count = getattr(self._held, "count", 0) + 1
        try:
            yield engine
        finally:
            self._held.count -= 1
            if temporary:
                engine.kill()
                with self._extras_lock:
                    self.extras -= 1
            else:
                engine.lock.release()

    def _acquire(self, account_key: str) -> tuple[EngineProcess, bool]:
        preferred = zlib.crc32(account_key.encode()) % len(self.engines)
        order = [self.engines[(preferred + i) % len(self.engines)] for i in range(len(self.engines))]
        for engine in order:
            if engine.lock.acquire(blocking=False):
                return engine, False
        if not getattr(self._held, "count", 0):
            order[0].lock.acquire()   # its holder does not depend on us: waiting is safe
            return order[0], False
        with self._extras_lock:
            if len(self.engines) + self.extras >= self.max_engines:
                raise PoolExhausted(f"all {self.max_engines} hook engines are busy")
            self.extras += 1
        return EngineProcess(*self._engine_args), True

    def mark_suspect(self, installation_id: str, code_hash: str) -> None:
        with self._suspects_lock:
            self.suspects.add((installation_id, code_hash))

    def is_suspect(self, installation_id: str, code_hash: str) -> bool:
        return (installation_id, code_hash) in self.suspects

    def compile(self, source: str, language: str) -> dict:
        with self.engine_for("compiler") as engine:
            for attempt in range(2):
                try:
                    return engine.request({"op": "compile", "source": source, "language": language},
                                          silence_limit=60)
                except EngineCrashed:
                    if attempt:
                        raise
        raise AssertionError("unreachable")

    def shutdown(self) -> None:
        for engine in self.engines:
            engine.kill()


_default_pool: EnginePool | None = None
_default_lock = threading.Lock()


def default_pool(**kwargs) -> EnginePool:
    """The process's shared pool, created with `kwargs` on first use."""
    global _default_pool
    with _default_lock:
        if _default_pool is None:
            _default_pool = EnginePool(**kwargs)
        return _default_pool

"""A TCP relay on loopback between the hub and its PostgreSQL that can be cut and restored (to the hub, a
database that went away: connections reset, new ones refused, then back on the same address) or frozen
and thawed (a database that hangs: connections stay open and new ones are taken, but no byte moves
either way, as when the server is stopped with SIGSTOP)."""

from __future__ import annotations

import contextlib
import select
import socket
import threading

from tests.integration.celery_services import free_port


class TcpCut:
    def __init__(self, upstream: tuple[str, int]):
        self.upstream, self.port = upstream, free_port()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._flowing = threading.Event()
        self._flowing.set()

    def start(self) -> TcpCut:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def cut(self) -> None:
        """Refuses new connections and resets every open one."""
        with self._lock:
            listener, self._listener = self._listener, None
            doomed, self._open = self._open, set()
        if listener is not None:
            listener.close()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                sock.close()

    def freeze(self) -> None:
        """From now on no byte is relayed, on open connections or new ones, until thaw()."""
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return   # cut
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    server.close()
                    return
                self._open.update((client, server))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while True:
                readable, _, _ = select.select([a, b], [], [], 1.0)
                if readable and not self._flowing.is_set():
                    self._flowing.wait()   # frozen: what arrived waits in the kernel's buffers
                    continue
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            with self._lock:
                self._open.discard(a)
                self._open.discard(b)
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()

"""A real HTTP platform on 127.0.0.1 for tests: records the hub's signed calls and answers as told."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from plugins_app.services.host.platform import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify_signature

SECRET = "stub-signing-secret"


class PlatformStub:
    """`calls` lists every request as {path, body, signed}; `fail(path, *statuses)` queues answers."""

    def __init__(self, secret: str = SECRET):
        self.secret = secret
        self.calls: list[dict] = []
        self.answers: dict[str, deque] = defaultdict(deque)
        self.replies: dict[str, dict] = {}
        self.session_ids = iter(f"9007199254740993{i}" for i in range(10_000))
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hub"

    def start(self) -> PlatformStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail(self, path: str, *statuses: int) -> None:
        """Answer the next calls to `path` with these HTTP statuses, then normally again."""
        self.answers[path].extend(statuses)

    def reply(self, path: str, body: dict) -> None:
        """Answer successful calls to `path` with this JSON body."""
        self.replies[path] = body

    def calls_to(self, path: str) -> list[dict]:
        with self._lock:
            return [c for c in self.calls if c["path"] == path and c["status"] == 200]

    def wait_for(self, path: str, count: int = 1, timeout: float = 30) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            calls = self.calls_to(path)
            if len(calls) >= count:
                return calls
            time.sleep(0.05)
        raise AssertionError(f"the platform stub got {len(self.calls_to(path))} call(s) to {path}, "
                             f"expected {count} within {timeout} s (all calls: {self.calls})")

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.removeprefix("/hub")
                signed = verify_signature(stub.secret, self.headers.get(TIMESTAMP_HEADER, ""), raw,
                                          self.headers.get(SIGNATURE_HEADER))
                with stub._lock:
                    queued = stub.answers[path]
                    status = queued.popleft() if queued else 200
                    stub.calls.append({"path": path, "body": json.loads(raw or b"null"), "signed": signed,
                                       "status": status})
                if path in stub.replies:
                    answer = stub.replies[path]
                else:
                    answer = {"sessionId": next(stub.session_ids)} if path == "/missions" else {"ok": True}
                body = json.dumps(answer if status == 200 else {"error": "stub says no"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        return Handler

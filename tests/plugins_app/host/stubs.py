"""Real local HTTP servers the host-surface tests talk to: a platform, an LLM, a plain web site."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from plugins_app.services.host.platform import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify_signature


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


# A responder gets the recorded request and returns (status, headers, body bytes).
Responder = Callable[[Recorded], tuple[int, dict, bytes]]


@dataclass
class StubServer:
    """An HTTP server on 127.0.0.1 (a free port) that records every request it answers."""

    responder: Responder
    requests: list = field(default_factory=list)

    def __post_init__(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                recorded = Recorded(self.command, self.path, dict(self.headers.items()),
                                    self.rfile.read(length) if length else b"")
                stub.requests.append(recorded)
                status, headers, body = stub.responder(recorded)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def json_answer(status: int, payload) -> tuple[int, dict, bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode()


class PlatformStub(StubServer):
    """The platform: checks the hub's signature on every call and answers per path."""

    def __init__(self, secret: str, routes: dict | None = None):
        self.secret = secret
        self.routes = routes or {}
        self.bad_signatures = 0
        super().__init__(self._respond)

    def _respond(self, req: Recorded):
        if not verify_signature(self.secret, req.headers.get(TIMESTAMP_HEADER), req.body,
                                req.headers.get(SIGNATURE_HEADER)):
            self.bad_signatures += 1
            return json_answer(401, {"error": "bad signature"})
        route = self.routes.get(req.path)
        if route is None:
            return json_answer(404, {"error": "no such path"})
        if callable(route):
            return route(req)
        return json_answer(200, route)


class LLMStub(StubServer):
    """An OpenAI-compatible /chat/completions endpoint answering with `reply(request_json)`."""

    def __init__(self, reply: Callable[[dict], str] | str = "ok"):
        self.reply = reply if callable(reply) else (lambda _body, text=reply: text)
        super().__init__(self._respond)

    def _respond(self, req: Recorded):
        if not req.path.endswith("/chat/completions") or req.method != "POST":
            return json_answer(404, {"error": {"message": "not found"}})
        body = req.json()
        text = self.reply(body)
        return json_answer(200, {
            "id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
        })


def execute(client, hook, context, **extra):
    """POST /api/v1/hooks/{hook}/execute and return the decoded body (asserting a 200)."""
    response = client.post(f"/api/v1/hooks/{hook}/execute", {"context": context, **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def reporter(hook: str, expression: str) -> str:
    """A plugin whose `hook` handler returns JSON of {ok: <expression>} or {error: message}."""
    return (f"globalThis.middleware.{hook} = async (c) => {{\n"
            f"  try {{ return JSON.stringify({{ ok: await ({expression}) }}); }}\n"
            f"  catch (e) {{ return JSON.stringify({{ error: String(e && e.message) }}); }}\n"
            f"}};")

"""`hub dev`'s host members: local stand-ins that say what would be called and answer like an empty hub
(no agents, no files, no messages); host.fetch reaches loopback only, and only with --allow-fetch."""

from __future__ import annotations

import ipaddress
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from plugins_app.runtime.web.chain import Handler, HostError

FETCH_TIMEOUT_SECONDS = 5.0
FETCH_MAX_BYTES = 1024 * 1024

# What an account with nothing in it answers; the members that need the outside world refuse.
EMPTY_ANSWERS: dict[str, Callable[[list], Any]] = {
    "agents.list": lambda args: {"agents": []},
    "session.conversation.read": lambda args: {"messages": []},
    "session.peer.send": lambda args: {"delivered": True, "text": args[0] if args else None},
    "workspace.list": lambda args: {"files": []},
    "workspace.write": lambda args: {"path": args[0] if args else "", "size": len(str(args[1])) if len(args) > 1
                                     else 0},
    "workspace.delete": lambda args: {"deleted": False},
}
REFUSED = {
    "workspace.read": "no such file in the local stand-in's empty workspace",
    "llm": "no model is called locally",
    "decide": "no model is called locally",
    "ssh.command": "no SSH host is reached locally",
}


class StandIns:
    """The host function run_chain calls; `calls` keeps what the plugin asked for, in order."""

    def __init__(self, allow_fetch: bool = False, say: Callable[[str], None] = lambda line: None):
        self.allow_fetch, self.say = allow_fetch, say
        self.calls: list[dict] = []

    def __call__(self, handler: Handler, name: str, args: list) -> Any:
        self.calls.append({"member": f"host.{name}", "args": args})
        self.say(f"host.{name}({', '.join(repr(a) for a in args)[:200]})")
        if name == "fetch":
            return self._fetch(args)
        if name in EMPTY_ANSWERS:
            return EMPTY_ANSWERS[name](args)
        raise HostError(f"host.{name} (local stand-in): {REFUSED.get(name, 'not available locally')}")

    def _fetch(self, args: list) -> dict:
        url = args[0] if args and isinstance(args[0], str) else ""
        init = args[1] if len(args) > 1 and isinstance(args[1], dict) else {}
        if not self.allow_fetch:
            raise HostError(f"host.fetch (local stand-in): not fetched: {url} (--allow-fetch lets loopback through)")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or not _loopback(parts.hostname):
            raise HostError(f"host.fetch (local stand-in): only loopback URLs are fetched locally, not {url}")
        body = init.get("body")
        request = urllib.request.Request(url, method=str(init.get("method", "GET")).upper(),
                                         data=body.encode() if isinstance(body, str) else None,
                                         headers={str(k): str(v) for k, v in (init.get("headers") or {}).items()})
        try:
            with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_SECONDS) as response:
                raw, status, headers = response.read(FETCH_MAX_BYTES), response.status, response.getheaders()
        except urllib.error.HTTPError as exc:
            raw, status, headers = exc.read(FETCH_MAX_BYTES), exc.code, list(exc.headers.items())
        except OSError as exc:
            raise HostError(f"host.fetch: {parts.hostname} failed: {exc}") from None
        return {"status": status, "headers": {k.lower(): v for k, v in headers},
                "body": raw.decode("utf-8", errors="replace")}


def _loopback(hostname: str) -> bool:
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(hostname, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses)

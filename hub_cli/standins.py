"""`hub dev`'s host members: local stand-ins that say what would be called and answer like an empty hub
(no agents, no files, no messages); host.fetch reaches loopback only, and only with --allow-fetch, by the
hub's own request rules (services/host/outbound.py: no redirect followed, no proxy, checked addresses)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hub_cli.local_kv import LocalKv
from plugins_app.runtime.web.chain import Handler, HostError
from plugins_app.services.host.outbound import Rules, request_parts, send
from plugins_app.services.host.ssrf import IPAddress, Refused, resolve

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

    def __init__(self, allow_fetch: bool = False, say: Callable[[str], None] = lambda line: None,
                 kv: LocalKv | None = None):
        self.allow_fetch, self.say = allow_fetch, say
        self.kv = kv if kv is not None else LocalKv()
        self.calls: list[dict] = []

    def __call__(self, handler: Handler, name: str, args: list) -> Any:
        self.calls.append({"member": f"host.{name}", "args": args})
        self.say(f"host.{name}({', '.join(repr(a) for a in args)[:200]})")
        if name == "fetch":
            return self._fetch(args)
        if name.startswith("kv."):
            return self.kv.answer(name.removeprefix("kv."), args)
        if name in EMPTY_ANSWERS:
            return EMPTY_ANSWERS[name](args)
        raise HostError(f"host.{name} (local stand-in): {REFUSED.get(name, 'not available locally')}")

    def _fetch(self, args: list) -> dict:
        url = args[0] if args and isinstance(args[0], str) else ""
        if not self.allow_fetch:
            raise HostError(f"host.fetch (local stand-in): not fetched: {url} (--allow-fetch lets loopback through)")
        url, method, headers, body = request_parts(args)
        return send(url, method, headers, body, LOOPBACK_RULES)


def _loopback_addresses(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to, when all are loopback (the connection goes to exactly these)."""
    addresses = resolve(host, port)
    for ip in addresses:
        inner = ip.ipv4_mapped if ip.version == 6 else None
        if not (ip.is_loopback or (inner is not None and inner.is_loopback)):
            shown = host if host == str(ip) else f"{host} (resolves to {ip})"
            raise Refused(f"{shown} is not a loopback address; only loopback URLs are fetched locally")
    return addresses


LOOPBACK_RULES = Rules(_loopback_addresses, FETCH_TIMEOUT_SECONDS, FETCH_MAX_BYTES,
                       refused="host.fetch (local stand-in) refused")

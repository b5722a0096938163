"""Maps the host members a plugin's code calls to the permissions an admin grants."""

from __future__ import annotations

from collections.abc import Iterable

# host members that need no grant: they reach nothing outside the plugin's own invocation.
FREE_MEMBERS = {"log", "config"}

PERMISSIONS = {
    "fetch": "host:fetch",
    "llm": "host:llm",
    "decide": "host:decide",
    "agents": "host:agents",
    "session": "host:session",
    "workspace": "host:workspace",
    "ssh": "host:ssh:command",
}
ALL_PERMISSIONS = tuple(sorted(set(PERMISSIONS.values())))


def permission_for(member: str) -> str | None:
    """`member` is a dotted path under host, e.g. "ssh.command" or "session.peer.send"."""
    top = member.split(".", 1)[0]
    if top in FREE_MEMBERS:
        return None
    return PERMISSIONS.get(top)


def derive_permissions(members: Iterable[str]) -> list[str]:
    return sorted({p for p in (permission_for(m) for m in members) if p})

"""Maps the host members a plugin's code calls to the permissions an admin grants (from runtime/members.py)."""

from __future__ import annotations

from collections.abc import Iterable

from plugins_app.runtime.tables.members import PERMISSION_BY_TOP

ALL_PERMISSIONS = tuple(sorted({p for p in PERMISSION_BY_TOP.values() if p}))


def permission_for(member: str) -> str | None:
    """`member` is a dotted path under host, e.g. "ssh.command" or "session.peer.send"."""
    return PERMISSION_BY_TOP.get(member.split(".", 1)[0])


def derive_permissions(members: Iterable[str]) -> list[str]:
    return sorted({p for p in (permission_for(m) for m in members) if p})

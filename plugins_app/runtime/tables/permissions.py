"""Maps the host members a plugin's code calls, and the secrets it names, to the permissions an admin grants."""

from __future__ import annotations

import re
from collections.abc import Iterable

from plugins_app.runtime.tables.members import PERMISSION_BY_TOP

ALL_PERMISSIONS = tuple(sorted({p for p in PERMISSION_BY_TOP.values() if p}))


def permission_for(member: str) -> str | None:
    """`member` is a dotted path under host, e.g. "ssh.command" or "session.peer.send"."""
    return PERMISSION_BY_TOP.get(member.split(".", 1)[0])


def derive_permissions(members: Iterable[str]) -> list[str]:
    return sorted({p for p in (permission_for(m) for m in members) if p})


# `{{secret.NAME}}` in a plugin's source: host.fetch puts the account's secret NAME there when it
# sends, if the secret:NAME permission is granted. Read from the source text (a placeholder built at
# run time from pieces is not declared, so it is never granted and never injected).
SECRET_NAME = r"[A-Z][A-Z0-9_]{0,63}"
SECRET_PLACEHOLDER = re.compile(r"\{\{secret\.(" + SECRET_NAME + r")\}\}")
SECRET_PERMISSION = re.compile(r"secret:(" + SECRET_NAME + r")")


def secret_names(text: str) -> list[str]:
    """The secret names `text` writes placeholders for, sorted, without repeats."""
    return sorted(set(SECRET_PLACEHOLDER.findall(text)))


def secret_permissions(source: str) -> list[str]:
    return [f"secret:{name}" for name in secret_names(source)]


def is_secret_permission(permission: str) -> bool:
    return SECRET_PERMISSION.fullmatch(permission) is not None


def calls_needing(permission: str, members: Iterable[str]) -> list[str]:
    """What stops working without `permission`, as `host.*` calls among `members` (the ones the code
    makes); a secret's permission is needed by the `{{secret.NAME}}` placeholder host.fetch fills."""
    match = SECRET_PERMISSION.fullmatch(permission)
    if match:
        return [f"{{{{secret.{match.group(1)}}}}} in host.fetch"]
    return [f"host.{m}" for m in members if permission_for(m) == permission]

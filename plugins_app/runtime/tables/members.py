"""The one table of host.* members: each member's permission, budget charging and which hooks offer it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from plugins_app.runtime.tables.hooks import HOOKS, HookSpec

# Which invocations a member is offered to, by what the hook carries (the harness builds host.session,
# host.workspace and host.ssh only when the chain's host plan says so).
OFFERED_BY: dict[str, Callable[[HookSpec], bool]] = {
    "always": lambda spec: True,
    "session": lambda spec: spec.session_field is not None,
    "workspace": lambda spec: spec.carries_agent,
    "ssh": lambda spec: spec.ssh,
}


@dataclass(frozen=True)
class HostMember:
    name: str                   # the dotted path under `host`, as the plugin calls it
    permission: str | None      # the grant an account admin gives; None: free
    offered: str = "always"     # a key of OFFERED_BY
    # Awaiting a charged member counts against the handler's 5 s budget; an uncharged one (a remote
    # command that may run for minutes) does not.
    charged: bool = True
    # False: the harness answers it inside the isolate (no call reaches the host bridge).
    bridged: bool = True
    # True: answering it reaches a system outside the hub (the network, an LLM, the platform, a server).
    # A replay or a shadow run never makes such a call: a stand-in answers it and the run reports it.
    outward: bool = False

    @property
    def top(self) -> str:
        return self.name.split(".", 1)[0]

    def hooks(self) -> tuple[str, ...]:
        return tuple(name for name, spec in HOOKS.items() if OFFERED_BY[self.offered](spec))


HOST_MEMBERS: tuple[HostMember, ...] = (
    HostMember("log", None, bridged=False),
    HostMember("config", None, bridged=False),
    HostMember("fetch", "host:fetch", outward=True),
    HostMember("llm", "host:llm", outward=True),
    HostMember("decide", "host:decide", outward=True),
    HostMember("agents.list", "host:agents"),
    HostMember("session.peer.send", "host:session", offered="session"),
    HostMember("session.conversation.read", "host:session", offered="session", outward=True),
    HostMember("workspace.read", "host:workspace", offered="workspace"),
    HostMember("workspace.write", "host:workspace", offered="workspace"),
    HostMember("workspace.list", "host:workspace", offered="workspace"),
    HostMember("workspace.delete", "host:workspace", offered="workspace"),
    HostMember("ssh.command", "host:ssh:command", offered="ssh", charged=False, outward=True),
)

MEMBERS_BY_NAME: dict[str, HostMember] = {m.name: m for m in HOST_MEMBERS}
BRIDGED_MEMBERS: frozenset[str] = frozenset(m.name for m in HOST_MEMBERS if m.bridged)
UNCHARGED_MEMBERS: frozenset[str] = frozenset(m.name for m in HOST_MEMBERS if not m.charged)
OUTWARD_MEMBERS: frozenset[str] = frozenset(m.name for m in HOST_MEMBERS if m.outward)


def _permission_by_top() -> dict[str, str | None]:
    """A plugin's code is granted by the top-level name it reaches (`host.session.id` needs host:session)."""
    by_top: dict[str, str | None] = {}
    for m in HOST_MEMBERS:
        if by_top.setdefault(m.top, m.permission) != m.permission:
            raise ValueError(f"host.{m.top}.* members must share one permission")
        if m.offered not in OFFERED_BY:
            raise ValueError(f"host.{m.name}: unknown offer {m.offered!r}")
    return by_top


PERMISSION_BY_TOP = _permission_by_top()

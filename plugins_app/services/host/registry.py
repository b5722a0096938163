"""The host.* members plugins call, handed to the host bridge by register() (from the app's ready())."""

from plugins_app.services.execution import host_bridge
from plugins_app.services.host import agents, fetch, llm, session, ssh_command, workspace

MEMBER_MODULES = (agents, fetch, llm, session, ssh_command, workspace)


def register() -> None:
    host_bridge.register_members([fn for module in MEMBER_MODULES for fn in host_bridge.marked_members(module)])

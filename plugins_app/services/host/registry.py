"""The host.* members plugins call, handed to the host bridge by register() (from the app's ready())."""

from plugins_app.services.execution import async_host_bridge, host_bridge
from plugins_app.services.host import agents, async_fetch, async_llm, fetch, llm, session, ssh_command, workspace

MEMBER_MODULES = (agents, fetch, llm, session, ssh_command, workspace)
# The async implementations of members that wait on the network, for async runs (the others run
# their sync function on a host thread there).
ASYNC_MEMBER_MODULES = (async_fetch, async_llm)


def register() -> None:
    host_bridge.register_members([fn for module in MEMBER_MODULES for fn in host_bridge.marked_members(module)])
    async_host_bridge.register_async_members([fn for module in ASYNC_MEMBER_MODULES
                                              for fn in async_host_bridge.marked_async_members(module)])

"""The host.* members plugins call; register() (called from the app's ready()) installs them."""

from plugins_app.services import execution, host

from . import agents, fetch, llm, log, session, ssh, workspace

MEMBER_MODULES = (agents, fetch, llm, session, ssh, workspace)


def register() -> None:
    """Hand the member functions to the host bridge and the log store to the execution service."""
    host.register_members([fn for module in MEMBER_MODULES for fn in host.marked_members(module)])
    execution.register_log_sink(log.store_logs)

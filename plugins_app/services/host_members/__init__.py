"""The host.* members plugins call; importing this package registers them with the host bridge."""

from . import agents, fetch, llm, log, session, ssh, workspace  # noqa: F401  (registration side effects)

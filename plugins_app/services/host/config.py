"""The host surface's settings: what plugins may reach through host.* (HUB_FETCH_*, the platform
bridge, the LLM endpoint, plugin logs, workspaces), read once at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from plugins_app.runtime.environment import Env


@dataclass(frozen=True)
class HostConfig:
    fetch_allow_private: bool = False   # host.fetch refuses loopback, private and metadata addresses unless on
    # A development server's refusal also says how to allow them (a production one does not point
    # plugin authors at an operator's switch).
    fetch_explain_private: bool = False
    fetch_max_bytes: int = 1024 * 1024
    fetch_timeout_seconds: float = 5.0
    # The platform bridge connects only to these host names (".example.com" takes subdomains),
    # addresses and CIDR networks.
    platform_allowed_hosts: tuple[str, ...] = ()
    llm_base_url: str = ""              # an OpenAI-compatible chat completions endpoint
    llm_api_key: str = ""
    llm_model: str = ""
    llm_timeout_seconds: float = 5.0
    plugin_log_limit: int = 1000        # host.log lines kept per installation
    workspace_quota_bytes: int = 5 * 1024 * 1024

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, debug: bool) -> HostConfig:
        env = Env(environ)
        return cls(
            fetch_allow_private=env.flag("HUB_FETCH_ALLOW_PRIVATE", False),
            fetch_explain_private=debug,
            fetch_max_bytes=env.integer("HUB_FETCH_MAX_BYTES", 1024 * 1024, minimum=1),
            fetch_timeout_seconds=env.number("HUB_FETCH_TIMEOUT_SECONDS", 5.0),
            # A development server allows loopback unless the variable says otherwise.
            platform_allowed_hosts=env.items("HUB_PLATFORM_ALLOWED_HOSTS", ["127.0.0.0/8", "::1"] if debug else []),
            llm_base_url=env.text("LLM_BASE_URL"), llm_api_key=env.text("LLM_API_KEY"),
            llm_model=env.text("LLM_MODEL"), llm_timeout_seconds=env.number("LLM_TIMEOUT_SECONDS", 5.0),
            plugin_log_limit=env.integer("HUB_PLUGIN_LOG_LIMIT", 1000, minimum=1),
            workspace_quota_bytes=env.integer("HUB_WORKSPACE_QUOTA_BYTES", 5 * 1024 * 1024),
        )

"""The account's agents as the platform registers them, and host.agents.list (a plugin's crew)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet

from accounts.models import Account
from plugins_app.errors import InvalidInput, NotFound
from plugins_app.models import Agent, Installation, Plugin
from plugins_app.runtime.tables.context import MAX_ID_LENGTH, is_platform_id
from plugins_app.services.execution.host_bridge import HostCall, member

MAX_NAME_CHARS = 200


def check_agent_id(agent_id) -> str:
    if not is_platform_id(agent_id) or "/" in agent_id:
        raise InvalidInput("agentId", f"expected an id string of 1 to {MAX_ID_LENGTH} characters")
    return agent_id


def installed_plugin(account: Account, slug: object) -> Plugin | None:
    if slug is None:
        return None
    if not isinstance(slug, str) or not slug:
        raise InvalidInput("plugin", "expected an installed plugin's slug, or null")
    installed = Installation.objects.filter(account=account, plugin__slug=slug).select_related("plugin")
    # The account's own plugin wins over an official one of the same slug.
    installation = installed.filter(plugin__account=account).first() or installed.first()
    if installation is None:
        raise InvalidInput("plugin", f"no plugin {slug!r} is installed in this account")
    return installation.plugin


@transaction.atomic
def register_agent(account, agent_id, data) -> tuple[Agent, bool]:
    """Create or replace the agent `agent_id`; returns (agent, created)."""
    check_agent_id(agent_id)
    if not isinstance(data, dict):
        raise InvalidInput("name", 'send {"name": "...", "plugin": <slug or null>}')
    name = data.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        raise InvalidInput("name", f"expected a non-empty string of at most {MAX_NAME_CHARS} characters")
    plugin = installed_plugin(account, data.get("plugin"))
    agent, created = Agent.objects.select_for_update().get_or_create(
        account=account, agent_id=agent_id, defaults={"name": name.strip(), "plugin": plugin})
    if not created:
        agent.name, agent.plugin = name.strip(), plugin
        agent.save(update_fields=["name", "plugin", "updated_at"])
    return agent, created


def get_agent(account, agent_id) -> Agent:
    agent = Agent.objects.filter(account=account, agent_id=agent_id).select_related("plugin").first()
    if agent is None:
        raise NotFound(f"agent {agent_id} is not registered in this account")
    return agent


def list_agents(account, params) -> QuerySet[Agent]:
    qs = Agent.objects.filter(account=account).select_related("plugin")
    if params.get("plugin"):
        qs = qs.filter(plugin__slug=params["plugin"])
    return qs.order_by("name", "agent_id")


def delete_agent(account, agent_id) -> None:
    get_agent(account, agent_id).delete()


def crew_of(account, installation_id: str) -> list[dict]:
    """The agents owned by the plugin of `installation_id`, as host.agents.list returns them."""
    rows = (Agent.objects.filter(account=account, plugin__installations__pk=int(installation_id),
                                 plugin__installations__account=account)
            .order_by("name", "agent_id").values_list("agent_id", "name"))
    return [{"id": agent_id, "name": name} for agent_id, name in rows]


@member("agents.list")
def agents_list(call: HostCall, args: list) -> dict:
    return {"agents": crew_of(call.account, call.handler.installation_id)}

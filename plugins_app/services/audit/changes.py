"""The account change log: who changed an account's plugins and chains, when, from what to what."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import QuerySet
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from plugins_app.errors import InvalidInput
from plugins_app.models import AccountChange
from plugins_app.services.audit import queries
from plugins_app.services.ids import parse_id

ACTIONS = AccountChange.Action


@dataclass(frozen=True)
class Actor:
    name: str
    user_id: int | None = None


SYSTEM = Actor("system")
# The request being answered; set by ChangeActorMiddleware, read when a change is recorded, so the
# services need no extra argument to know who acts.
_request: contextvars.ContextVar = contextvars.ContextVar("hub_change_request", default=None)


def actor_of(request) -> Actor:
    """An API call acts as its key; an admin page as its user; anything else as the system."""
    if request is None:
        return SYSTEM
    key = getattr(request, "auth", None)
    if key is not None and hasattr(key, "prefix"):
        return Actor(f"API key {key.name or key.prefix}"[:150])
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Actor(user.get_username()[:150], user.pk)
    return SYSTEM


def current_actor() -> Actor:
    return actor_of(_request.get())


class ChangeActorMiddleware:
    """Makes the request available to `current_actor()` while it is answered."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)


def record(account_id: int, action: str, summary: str, *, installation=None, before=None, after=None,
           actor: Actor | None = None) -> AccountChange:
    actor = actor or current_actor()
    return AccountChange.objects.create(
        account_id=account_id, action=action, summary=summary[:500], before=before, after=after,
        installation=installation, plugin_slug=installation.plugin.slug if installation is not None else "",
        actor_id=actor.user_id, actor_name=actor.name)


def query(account, params) -> QuerySet[AccountChange]:
    """The account's changes, newest first, filtered by action, plugin, installation, actor and dates."""
    qs = queries.common(AccountChange.objects.filter(account=account).select_related("installation"), params,
                        hook=False)
    if params.get("action"):
        if params["action"] not in ACTIONS.values:
            raise InvalidInput("action", "expected one of " + ", ".join(ACTIONS.values))
        qs = qs.filter(action=params["action"])
    if params.get("installationId"):
        qs = qs.filter(installation_id=parse_id(params["installationId"], "installationId"))
    if params.get("actor"):
        qs = qs.filter(actor_name=params["actor"])
    return qs.order_by("-created_at", "-id")


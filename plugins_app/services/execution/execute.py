"""Executing a hook's chain for an account: the execute API's body, and the (result, effects) form other
callers use. Both are thin wrappers over the one seam, services/execution/invoke.py."""

from __future__ import annotations

from plugins_app.errors import InvalidInput
from plugins_app.runtime.web.chain import ChainResult
from plugins_app.services.execution.invoke import (  # noqa: F401 (HOP_LIMIT and HandlerSwap: re-exported)
    HOP_LIMIT,
    HandlerSwap,
    Invocation,
    Mode,
    failing,
    finish,
    invoke,
    open_invocation,
    prepare,
    run,
)
from plugins_app.services.execution.record import record_result  # noqa: F401 (re-exported)
from plugins_app.services.hooks import require_hook


def prepare_request(account, hook: str, body, *, traceparent: str | None = None,
                    asynchronous: bool = False) -> Invocation:
    """The execute API's body ({"context", "hop"?, "turnId"?, "conversation"?}) checked, and its live run
    prepared: the seam's first step, which the sync and the async execute paths share."""
    invocation = open_invocation(account, hook, mode=Mode.LIVE, origin="api", traceparent=traceparent)
    with failing(invocation):
        require_hook(hook)
        if not isinstance(body, dict):
            raise InvalidInput("body", "expected a JSON object with a context")
        if "context" not in body:
            raise InvalidInput("context", "this field is required")
    return prepare(account, hook, body["context"], hop=body.get("hop", 0), turn_id=body.get("turnId", ""),
                   extras={"conversation": body.get("conversation")}, invocation=invocation,
                   asynchronous=asynchronous)


def execute_request(account, hook: str, body, *, traceparent: str | None = None) -> Invocation:
    """The execute API's call, run in this thread: prepare, the engine, finish."""
    invocation = prepare_request(account, hook, body, traceparent=traceparent)
    run(invocation)
    return finish(invocation)


def execute_hook(account, hook: str, context, *, hop: int = 0, turn_id: str = "", record: bool = True,
                 extras: dict | None = None, origin: str = "api") -> tuple[ChainResult, list]:
    """Run the account's chain for `hook`; returns the result and the effects host calls asked for.
    `record=False` is a try-run: nothing written (no audit rows, metering, strikes or lane moves), host
    calls real. `origin` names the caller in the span and the metrics (cron, timer, ssh, session...)."""
    invocation = invoke(account, hook, context, mode=Mode.LIVE if record else Mode.TRY, origin=origin,
                        hop=hop, turn_id=turn_id, extras=extras)
    assert invocation.result is not None
    return invocation.result, invocation.effects

"""host.session: sending a message to a peer session (through interAgentMessage) and reading the transcript."""

from __future__ import annotations

from plugins_app.errors import HubError
from plugins_app.runtime.tables.context import MAX_ID_LENGTH, is_platform_id
from plugins_app.runtime.web.chain import SESSION_HOP_LIMIT, HostError
from plugins_app.runtime.web.tier import PoolExhausted
from plugins_app.services.execution import execute as execution
from plugins_app.services.execution.host_bridge import HostCall, member
from plugins_app.services.host import platform

PEER_HOOK = "interAgentMessage"
PLATFORM_TIMEOUT_SECONDS = 4


def _session_of(call: HostCall) -> tuple[str, str | None]:
    spec = call.spec
    if not spec.session_field or call.hop > SESSION_HOP_LIMIT:
        raise HostError("host.session is not available here")
    return call.context[spec.session_field], call.context.get(spec.agent_field) if spec.agent_field else None


@member("session.peer.send", writes=True)
def peer_send(call: HostCall, args: list) -> dict:
    """Fire interAgentMessage for the message (one hop further) and hand the outcome to the platform."""
    session_id, agent_id = _session_of(call)
    if agent_id is None:
        raise HostError(f"host.session.peer.send is not available in {call.spec.name}: "
                        "the hook does not say which agent is sending")
    target = args[0] if args else None
    text = args[1] if len(args) > 1 else None
    if not is_platform_id(target):
        raise HostError(f"host.session.peer.send: the target must be a session id of 1 to {MAX_ID_LENGTH} characters")
    if not isinstance(text, str):
        raise HostError("host.session.peer.send: the text must be a string")
    hop = call.hop + 1
    context = {"senderSessionId": session_id, "senderAgentId": agent_id, "targetSessionId": target,
               "isSubagentReport": False, "text": text}
    try:
        result, reactions = execution.execute_hook(call.account, PEER_HOOK, context, hop=hop,
                                                   turn_id=call.turn_id, extras=call.extras,
                                                   record=call.record, origin="session")
    except HubError as exc:
        raise HostError(f"host.session.peer.send: {exc.detail}") from None
    except PoolExhausted as exc:
        raise HostError(f"host.session.peer.send: the hub is too busy to deliver it now ({exc})") from None
    cancellation = result.cancellation
    cancelled = cancellation is not None
    call.effects.append({
        "type": "peerMessage", "senderSessionId": session_id, "senderAgentId": agent_id,
        "targetSessionId": target, "text": result.value, "cancelled": cancelled,
        "reason": None if cancellation is None else cancellation.reason, "hop": hop,
    })
    # What the handlers of that message sent in turn, delivered after it.
    call.effects.extend(reactions)
    return {"delivered": not cancelled, "text": result.value}


@member("session.conversation.read", stand_in={"dryRun": True, "messages": []})
def conversation_read(call: HostCall, args: list) -> dict:
    """The conversation the caller sent with the request, else the platform's transcript."""
    session_id, _ = _session_of(call)
    sent = call.extras.get("conversation")
    if sent is not None:
        if isinstance(sent, list):
            return {"messages": sent}
        if isinstance(sent, dict) and isinstance(sent.get("messages"), list):
            return sent
        raise HostError("host.session.conversation.read: the conversation sent with the request is not "
                        "an array of messages or {messages: [...]}")
    try:
        answer = platform.call(call.account, "/conversations/read", {"sessionId": session_id},
                               timeout=PLATFORM_TIMEOUT_SECONDS)
    except HubError as exc:
        raise HostError(f"host.session.conversation.read: {exc.detail}") from None
    if not isinstance(answer.get("messages"), list):
        raise HostError("host.session.conversation.read: the platform's answer has no messages array")
    return answer

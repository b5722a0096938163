"""The SSH gateway: an agent's server operation through the three SSH hooks and the server itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from plugins_app.errors import Conflict, InvalidInput, SshUnavailable
from plugins_app.models import SshHost, SshTurn
from plugins_app.runtime.tables.hooks import SSH_KINDS
from plugins_app.runtime.web.chain import ChainResult
from plugins_app.services.execution.execute import execute_hook
from plugins_app.services.ssh import client as ssh
from plugins_app.services.ssh.hosts import get_host

OPENING, SENDING, COMPLETED = "sshConnectionOpening", "sshCommandSending", "sshCommandCompleted"
WITH_CONTENT = ("write_file", "edit_file")
# An opening that has not finished in this long was abandoned (the hub stopped mid-chain):
# the next operation of the turn fires the hook again, which the spec tells plugins to expect.
STALE_OPENING = timedelta(minutes=15)


@dataclass(frozen=True)
class Operation:
    session_id: str
    agent_id: str
    turn_id: str
    kind: str
    command: str | None = None
    path: str | None = None
    content: str | None = None
    intent: str | None = None


@dataclass
class GatewayResult:
    outcome: str                          # completed | cancelled | withheld
    operation: Operation                  # as the sshCommandSending chain left it
    result: ssh.SshResult | None = None   # None unless the operation ran and may be shown
    ran: bool = False
    cancellation: dict | None = None      # {hook, installationId, plugin, reason[, earlier]}
    hooks: dict[str, tuple[ChainResult, list]] = field(default_factory=dict)


def check_operation(op: Operation) -> None:
    """What each kind needs; raises InvalidInput naming the field."""
    if op.kind not in SSH_KINDS:
        raise InvalidInput("kind", "expected one of " + ", ".join(SSH_KINDS))
    if op.kind == "command":
        if not op.command or not op.command.strip():
            raise InvalidInput("command", "kind command needs the command to run")
        if op.path is not None or op.content is not None:
            raise InvalidInput("path" if op.path is not None else "content", "only file operations take it")
        return
    if op.command is not None:
        raise InvalidInput("command", f"kind {op.kind} takes a path, not a command")
    if not op.path:
        raise InvalidInput("path", f"kind {op.kind} needs the path")
    if op.kind in WITH_CONTENT and op.content is None:
        raise InvalidInput("content", f"kind {op.kind} needs the text to write")
    if op.kind not in WITH_CONTENT and op.content is not None:
        raise InvalidInput("content", f"kind {op.kind} writes nothing")


def execute(account, ssh_host_id, op: Operation) -> GatewayResult:
    check_operation(op)
    host = get_host(account, ssh_host_id)
    hooks: dict = {}
    refusal = _open_turn(account, host, op, hooks)
    if refusal is not None:
        return GatewayResult("cancelled", op, cancellation=refusal, hooks=hooks)

    sending, effects = execute_hook(account, SENDING, _sending_context(host, op), turn_id=op.turn_id, origin="ssh")
    hooks[SENDING] = (sending, effects)
    if sending.cancellation:
        return GatewayResult("cancelled", op, cancellation=_cancellation(SENDING, sending), hooks=hooks)
    op = _rewritten(op, sending.context)
    problem = _unrunnable(op)
    if problem:
        return GatewayResult("cancelled", op, hooks=hooks, cancellation={
            "hook": SENDING, "installationId": None, "plugin": None, "reason": problem})

    result = _perform(host, op, hooks)
    completed, effects = execute_hook(account, COMPLETED, _completed_context(host, op, result), turn_id=op.turn_id, origin="ssh")
    hooks[COMPLETED] = (completed, effects)
    if completed.cancellation:
        return GatewayResult("withheld", op, ran=True, cancellation=_cancellation(COMPLETED, completed), hooks=hooks)
    result.output = completed.context["output"]
    result.error_output = completed.context["errorOutput"]
    return GatewayResult("completed", op, result=result, ran=True, hooks=hooks)


# -- sshConnectionOpening, once per (server, session, turn) ---------------------------------------

def _open_turn(account, host: SshHost, op: Operation, hooks: dict) -> dict | None:
    """Fire sshConnectionOpening unless it already fired this turn; the refusal, if any."""
    turn, claimed = _claim_turn(account, host, op)
    if not claimed:
        if turn.state == SshTurn.State.OPENING:
            raise Conflict(f"the connection to {host.display_name} is still being opened for this turn; "
                           f"retry shortly")
        if turn.state != SshTurn.State.REFUSED:
            return None
        assert turn.cancellation is not None   # a refused turn keeps its refusal
        return dict(turn.cancellation, earlier=True)
    try:
        opening, effects = execute_hook(account, OPENING, _opening_context(host, op), turn_id=op.turn_id, origin="ssh")
    except BaseException:
        turn.delete()   # nothing was decided: the next operation tries again
        raise
    hooks[OPENING] = (opening, effects)
    refusal = _cancellation(OPENING, opening) if opening.cancellation else None
    turn.state = SshTurn.State.REFUSED if refusal else SshTurn.State.OPEN
    turn.cancellation = refusal
    turn.save(update_fields=["state", "cancellation", "updated_at"])
    return refusal


def _claim_turn(account, host: SshHost, op: Operation) -> tuple[SshTurn, bool]:
    now = timezone.now()
    SshTurn.objects.filter(ssh_host__account=account,
                           created_at__lt=now - timedelta(seconds=settings.HUB_SSH.turn_ttl_seconds)).delete()
    key = {"ssh_host": host, "session_id": op.session_id, "turn_id": op.turn_id}
    try:
        with transaction.atomic():
            return SshTurn.objects.create(**key), True
    except IntegrityError:
        turn = SshTurn.objects.get(**key)
    if turn.state == SshTurn.State.OPENING and turn.updated_at < now - STALE_OPENING:
        taken = SshTurn.objects.filter(pk=turn.pk, state=turn.state, updated_at=turn.updated_at).update(updated_at=now)
        return turn, bool(taken)
    return turn, False


# -- contexts -------------------------------------------------------------------------------------

def _common(host: SshHost, op: Operation) -> dict:
    return {"sessionId": op.session_id, "agentId": op.agent_id, "sshHostId": str(host.pk),
            "hostDisplayName": host.display_name}


def _opening_context(host: SshHost, op: Operation) -> dict:
    return {**_common(host, op), "hostname": host.hostname, "port": None if host.is_tunnel else host.port,
            "connectionType": host.connection_type, "username": host.username}


def _sending_context(host: SshHost, op: Operation) -> dict:
    context = {**_common(host, op), "kind": op.kind, "command": op.command, "path": op.path, "content": op.content}
    if op.intent is not None:
        context["intent"] = op.intent
    return context


def _completed_context(host: SshHost, op: Operation, result: ssh.SshResult) -> dict:
    return {**_common(host, op), "kind": op.kind, "command": op.command, "path": op.path,
            "exitCode": result.exit_code, "output": result.output, "errorOutput": result.error_output,
            "isTruncated": result.is_truncated, "durationMs": result.duration_ms}


def _rewritten(op: Operation, context: dict) -> Operation:
    return Operation(op.session_id, op.agent_id, op.turn_id, op.kind, context["command"], context["path"],
                     context["content"], op.intent)


def _unrunnable(op: Operation) -> str | None:
    """A chain may null out what the operation needs; then there is nothing to run."""
    if op.kind == "command" and not (op.command or "").strip():
        return "the sshCommandSending chain left no command to run"
    if op.kind != "command" and not op.path:
        return "the sshCommandSending chain left no path"
    if op.kind in WITH_CONTENT and op.content is None:
        return "the sshCommandSending chain left no content to write"
    return None


def _cancellation(hook: str, result: ChainResult) -> dict:
    c = result.cancellation
    assert c is not None   # called for a cancelled chain only
    return {"hook": hook, "installationId": c.installation_id, "plugin": c.plugin, "reason": c.reason}


# -- the operation itself -------------------------------------------------------------------------

def _perform(host: SshHost, op: Operation, hooks: dict) -> ssh.SshResult:
    timeout = settings.HUB_SSH.command_timeout_seconds
    try:
        target = ssh.target_for(host)
        # _unrunnable turned away an operation without its command or path.
        if op.kind == "command":
            assert op.command is not None
            return ssh.run_command(target, op.command, timeout=timeout)
        assert op.path is not None
        return ssh.run_file_operation(target, op.kind, op.path, op.content, timeout=timeout)
    except ssh.SshTimedOut as exc:
        return exc.result   # it ran: the model should see what it printed before the cut
    except (ssh.SshFailed, ValueError) as exc:
        raise SshUnavailable(str(exc), hooksFired=list(hooks)) from None

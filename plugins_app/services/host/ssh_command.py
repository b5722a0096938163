"""host.ssh.command: a plugin's own command on the server its SSH hook fired for, and no other."""

from __future__ import annotations

import math

from plugins_app.errors import InvalidInput
from plugins_app.models import SshHost
from plugins_app.runtime.web.chain import HostError
from plugins_app.services.execution.host_bridge import HostCall, member
from plugins_app.services.ids import parse_id
from plugins_app.services.ssh import client as ssh

MAX_CALLS = 10               # per handler invocation
DEFAULT_TIMEOUT_SECONDS = 60
MAX_TIMEOUT_SECONDS = 90
MAX_COMMAND_CHARS = 64 * 1024


@member("ssh.command", writes=True, stand_in={"dryRun": True, "exitCode": None, "output": "", "errorOutput": "",
                                              "isTruncated": False, "durationMs": 0})
def command(call: HostCall, args: list) -> dict:
    """Resolves {exitCode, output, errorOutput, isTruncated, durationMs}; a non-zero exit is a
    result. Never fires an SSH hook: it talks to the server directly."""
    if not call.spec.ssh:
        raise HostError("host.ssh.command is only available in the SSH hooks")
    if call.call_number > MAX_CALLS:
        raise HostError(f"host.ssh.command: at most {MAX_CALLS} calls per invocation; this was call "
                        f"{call.call_number}")
    text, timeout = _parse(args)
    host = _hook_host(call)
    try:
        return ssh.run_command(ssh.target_for(host), text, timeout=timeout).as_dict()
    except ssh.SshTimedOut:
        raise HostError(f"host.ssh.command: the command timed out after {timeout:g} s") from None
    except ssh.SshFailed as exc:
        raise HostError(f"host.ssh.command: {exc}") from None
    except ValueError as exc:   # the stored key cannot be decrypted
        raise HostError(f"host.ssh.command: {exc}") from None


def _parse(args: list) -> tuple[str, float]:
    text = args[0] if args else None
    if not isinstance(text, str) or not text.strip():
        raise HostError("host.ssh.command: the command must be a non-empty string")
    if len(text) > MAX_COMMAND_CHARS:
        raise HostError(f"host.ssh.command: the command is over {MAX_COMMAND_CHARS} characters")
    options = args[1] if len(args) > 1 else None
    if options is None:
        return text, DEFAULT_TIMEOUT_SECONDS
    if not isinstance(options, dict):
        raise HostError("host.ssh.command: options must be an object like {timeoutSeconds: 30}")
    unknown = sorted(set(options) - {"timeoutSeconds"})
    if unknown:
        raise HostError(f"host.ssh.command: unknown option {unknown[0]!r} (the only option is timeoutSeconds)")
    timeout = options.get("timeoutSeconds")
    if timeout is None:
        return text, DEFAULT_TIMEOUT_SECONDS
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
            or timeout <= 0:
        raise HostError("host.ssh.command: timeoutSeconds must be a positive number of seconds")
    if timeout > MAX_TIMEOUT_SECONDS:
        raise HostError(f"host.ssh.command: timeoutSeconds is {timeout:g}; the maximum is {MAX_TIMEOUT_SECONDS}")
    return text, float(timeout)


def _hook_host(call: HostCall) -> SshHost:
    host_id = call.context.get("sshHostId")
    try:
        host = SshHost.objects.select_related("jump_host").filter(
            pk=parse_id(host_id, "sshHostId"), account=call.account).first()
    except InvalidInput:
        host = None
    if host is None:
        raise HostError(f"host.ssh.command: server {host_id} is not one of this account's SSH hosts")
    return host

"""host.workspace: the agent's text files, stored by the hub and capped by a per-agent quota."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from plugins_app.models import WorkspaceFile
from plugins_app.runtime.web.chain import HostError
from plugins_app.services.execution.host_bridge import HostCall, member

MAX_PATH_CHARS = 255


def normalise_path(raw, *, allow_empty: bool = False) -> str:
    """"a//b/./c.txt" → "a/b/c.txt"; refuses absolute paths, "..", control characters and overlong paths."""
    if not isinstance(raw, str):
        raise HostError("host.workspace: a path must be a string")
    if raw.startswith("/"):
        raise HostError(f"host.workspace: {raw!r} is absolute; paths are relative to the workspace")
    if "\\" in raw or any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise HostError(f"host.workspace: {raw!r} contains a backslash or a control character")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise HostError(f"host.workspace: {raw!r} contains '..'")
    path = "/".join(parts)
    if not path and not allow_empty:
        raise HostError("host.workspace: the path is empty")
    if len(path) > MAX_PATH_CHARS:
        raise HostError(f"host.workspace: the path is over {MAX_PATH_CHARS} characters")
    return path


def _scope(call: HostCall):
    """The files of the agent the hook fired for (on interAgentMessage: the sender)."""
    agent_id = call.context.get(call.spec.agent_field) if call.spec.agent_field else None
    if not call.spec.carries_agent or not agent_id:
        raise HostError(f"host.workspace is not available in {call.spec.name}")
    return WorkspaceFile.objects.filter(account=call.account, agent_id=agent_id), agent_id


def _arg(args: list, index: int):
    return args[index] if len(args) > index else None


@member("workspace.read")
def read(call: HostCall, args: list) -> str | None:
    """The file's text, or null when there is no such file."""
    files, _ = _scope(call)
    return files.filter(path=normalise_path(_arg(args, 0))).values_list("content", flat=True).first()


@member("workspace.write", writes=True)
def write(call: HostCall, args: list) -> dict:
    files, agent_id = _scope(call)
    path = normalise_path(_arg(args, 0))
    content = _arg(args, 1)
    if not isinstance(content, str):
        raise HostError("host.workspace.write: the content must be a string")
    size = len(content.encode())
    quota = settings.HUB_HOST.workspace_quota_bytes
    with transaction.atomic():
        # Lock the agent's files so two writers cannot both fit under the quota (PostgreSQL
        # refuses FOR UPDATE with an aggregate, so the sum is taken here).
        used = sum(s for p, s in files.select_for_update().values_list("path", "size") if p != path)
        if used + size > quota:
            raise HostError(f"host.workspace.write: {path} ({size} bytes) would put the workspace of agent "
                            f"{agent_id} at {used + size} bytes, over its quota of {quota} bytes")
        WorkspaceFile.objects.update_or_create(account=call.account, agent_id=agent_id, path=path,
                                               defaults={"content": content, "size": size})
    return {"path": path, "size": size}


@member("workspace.list")
def list_files(call: HostCall, args: list) -> dict:
    """{files: [{path, size, updatedAt}]} under a directory prefix ("" for all)."""
    files, _ = _scope(call)
    prefix = normalise_path(_arg(args, 0) or "", allow_empty=True)
    if prefix:
        files = files.filter(path__startswith=prefix + "/") | files.filter(path=prefix)
    rows = files.order_by("path").values_list("path", "size", "updated_at")
    return {"files": [{"path": p, "size": s, "updatedAt": u.isoformat().replace("+00:00", "Z")}
                      for p, s, u in rows]}


@member("workspace.delete", writes=True)
def delete(call: HostCall, args: list) -> dict:
    files, _ = _scope(call)
    deleted, _ = files.filter(path=normalise_path(_arg(args, 0))).delete()
    return {"deleted": bool(deleted)}

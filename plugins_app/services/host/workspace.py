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


def _overlay(call: HostCall, agent_id) -> dict[str, str | None]:
    """A dry run's writes to this agent's files (path -> text, None once deleted), kept for the run only."""
    return call.overlay.setdefault("workspace", {}).setdefault(str(agent_id), {})


@member("workspace.read")
def read(call: HostCall, args: list) -> str | None:
    """The file's text, or null when there is no such file."""
    files, agent_id = _scope(call)
    path = normalise_path(_arg(args, 0))
    if call.dry_run and path in _overlay(call, agent_id):   # the run's own stood-in write
        return _overlay(call, agent_id)[path]
    return files.filter(path=path).values_list("content", flat=True).first()


def _checked_write(call: HostCall, args: list, *, lock: bool) -> tuple[str, str, int]:
    """(path, content, size) of a write that fits the agent's quota; with `lock`, the agent's files stay
    locked until the caller's transaction ends, so two writers cannot both fit under the quota."""
    files, agent_id = _scope(call)
    path = normalise_path(_arg(args, 0))
    content = _arg(args, 1)
    if not isinstance(content, str):
        raise HostError("host.workspace.write: the content must be a string")
    size = len(content.encode())
    quota = settings.HUB_HOST.workspace_quota_bytes
    # (PostgreSQL refuses FOR UPDATE with an aggregate, so the sum is taken here.)
    sizes = dict((files.select_for_update() if lock else files).values_list("path", "size"))
    if call.dry_run:
        sizes.update({p: len(text.encode()) if text is not None else 0 for p, text in _overlay(call, agent_id).items()})
    used = sum(s for p, s in sizes.items() if p != path)
    if used + size > quota:
        raise HostError(f"host.workspace.write: {path} ({size} bytes) would put the workspace of agent "
                        f"{agent_id} at {used + size} bytes, over its quota of {quota} bytes")
    return path, content, size


def write_dry(call: HostCall, args: list) -> dict:
    """A try-run's (or replay's) write: checked as a real one, kept in the run's overlay, written nowhere."""
    path, content, size = _checked_write(call, args, lock=False)
    _overlay(call, _scope(call)[1])[path] = content
    return {"path": path, "size": size, "dryRun": True}


@member("workspace.write", writes=True, dry_run=write_dry)
def write(call: HostCall, args: list) -> dict:
    _, agent_id = _scope(call)
    with transaction.atomic():
        path, content, size = _checked_write(call, args, lock=True)
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


def delete_dry(call: HostCall, args: list) -> dict:
    """A dry run's delete: the file is gone for the rest of the run only."""
    files, agent_id = _scope(call)
    path = normalise_path(_arg(args, 0))
    overlay = _overlay(call, agent_id)
    existed = overlay[path] is not None if path in overlay else files.filter(path=path).exists()
    overlay[path] = None
    return {"deleted": existed, "dryRun": True}


@member("workspace.delete", writes=True, dry_run=delete_dry)
def delete(call: HostCall, args: list) -> dict:
    files, _ = _scope(call)
    deleted, _ = files.filter(path=normalise_path(_arg(args, 0))).delete()
    return {"deleted": bool(deleted)}

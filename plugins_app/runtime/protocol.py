"""The messages between a web process and an engine: their names, shapes, crash kinds and limits."""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

from . import wire


class Op(str, enum.Enum):
    """What a frame on the engine socket is. Requests go to the engine; the rest come back."""

    RUN = "run"              # run one chain (RunRequest)
    COMPILE = "compile"      # transpile and probe a plugin's source
    PING = "ping"            # is the engine there; what it holds
    BENCH = "bench"          # run one chain n times inside the engine (bench/run.py)
    HOST = "host"            # engine -> web: a handler called a host member
    HOST_REPLY = "hostReply"  # web -> engine: the host member's answer
    SLOW = "slow"            # engine -> web: a handler has held the isolate for a long time
    RESULT = "result"        # engine -> web: the request's answer
    READY = "ready"          # engine -> supervisor/web: the engine is up


class CrashKind(str, enum.Enum):
    """Why an isolate (or, for CRASHED, an engine process) had to be replaced."""

    WEDGED = "wedged"    # never yielded after an await: only closing the isolate stops it
    MEMORY = "memory"    # hit the isolate's heap limit
    CRASHED = "crashed"  # the engine process died, or the harness itself failed


@dataclass(frozen=True)
class Limits:
    """What the harness enforces on every handler; one place for the defaults."""

    maxReason: int = 500                 # tools.cancel(reason) is cut to this many characters
    maxValueChars: int = 1024 * 1024     # a returned value larger than this is malformed
    maxLogs: int = 100                   # log lines kept per invocation
    maxLogChars: int = 2000              # characters kept per log line

    def as_json(self) -> str:
        return json.dumps(asdict(self))


DEFAULT_LIMITS = Limits()
DEFAULT_BUDGET_MS = 5000           # the spec's 5 s per handler
DEFAULT_ISOLATE_MEMORY_MB = 256    # heap limit of one engine's shared isolate


class HostPlan(TypedDict):
    """Which optional host members an invocation gets."""

    session: dict | None
    workspace: bool
    ssh: bool


class HandlerRef(TypedDict):
    id: str
    hash: str


class RunRequest(TypedDict, total=False):
    op: str
    id: int
    account: str
    hook: str
    context: dict
    budgetMs: int
    host: HostPlan
    traceValues: bool
    handlers: list[HandlerRef]
    code: dict[str, dict]   # installation id -> {"hash", "code", "config"}: sent when the engine misses it
    wait: bool              # queue even when the engine is busy (no other engine could take it)


class TraceEntry(TypedDict, total=False):
    id: str
    status: str             # ran | cancelled | error | timeout | malformed
    changed: bool
    durationMs: float
    warning: str | None
    logs: list
    logsDropped: int
    hostCalls: int
    crash: str              # a CrashKind value when the handler cost its isolate
    context: dict           # the value after this handler (traceValues only)


class RunResult(TypedDict, total=False):
    """An engine's answer to RUN: exactly one of done / missing / loadError / busy."""

    op: str
    id: int
    done: bool
    context: dict
    cancellation: dict | None   # {"index", "reason"}
    trace: list[TraceEntry]
    missing: list[str]          # installation ids whose code the engine needs
    loadError: str
    loadCrash: str              # with loadError: a CrashKind value when that load cost the isolate...
    loadCulprit: str            # ...and the installation whose code did it
    busy: bool                  # refused without running: try another engine
    lane: bool                  # ...and it is this account's own chain that keeps the engine busy


def result(request_id: Any, **fields) -> bytes:
    return wire.dumps({"op": Op.RESULT.value, "id": request_id, **fields})

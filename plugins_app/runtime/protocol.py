"""The messages between a web process and an engine: their names, shapes, crash kinds and limits;
and a request as an engine holds it while it runs (Job, RunState)."""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass
from typing import Any, NotRequired, Protocol, TypedDict

from . import wire


class Op(str, enum.Enum):
    """What a frame on the engine socket is. Requests go to the engine; the rest come back."""

    RUN = "run"              # run one chain (RunRequest)
    COMPILE = "compile"      # transpile (type-check when "typecheck") and probe a plugin's source
    PING = "ping"            # is the engine there; what it holds
    UNLOAD = "unload"        # forget installations' compartments and code: {account, ids} (uninstalled, redeployed)
    BENCH = "bench"          # run one chain n times inside the engine (bench/run.py)
    HOST = "host"            # engine -> web: a handler called a host member
    HOST_REPLY = "hostReply"  # web -> engine: the host member's answer
    SLOW = "slow"            # engine -> web: a handler has held the isolate for a long time
    QUEUED = "queued"        # engine -> web: the request waits in line (a death now costs it nothing: resent)
    STARTED = "started"      # engine -> web: ...and now its chain starts (a death after this fails it open)
    RESULT = "result"        # engine -> web: the request's answer
    READY = "ready"          # engine -> supervisor/web: the engine is up


class CrashKind(str, enum.Enum):
    """Why an isolate (or, for CRASHED, an engine process) had to be replaced."""

    WEDGED = "wedged"    # never yielded after an await: only closing the isolate stops it
    MEMORY = "memory"    # hit the isolate's heap limit
    CRASHED = "crashed"  # the engine process died, or the harness itself failed
    SILENT = "silent"    # the engine process stopped answering (its pulse stopped): a part's fault, no handler's


@dataclass(frozen=True)
class Limits:
    """What the harness enforces on every handler; one place for the defaults."""

    maxReason: int = 500                 # tools.cancel(reason) is cut to this many characters
    maxValueChars: int = 1024 * 1024     # a returned value larger than this is malformed
    maxLogs: int = 100                   # log lines kept per invocation
    maxLogChars: int = 2000              # characters kept per log line

    def as_json(self) -> str:
        return json.dumps(asdict(self))


DEFAULT_LIMITS = Limits()   # no operator tunes these: every engine enforces them

JsonObject = dict[str, Any]   # a JSON object as wire.loads gives it: a hook's context, a decoded frame


class HostPlan(TypedDict):
    """Which optional host members an invocation gets."""

    session: JsonObject | None   # {"id", "agentId", "kind"} when host.session is offered
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
    context: JsonObject
    budgetMs: int
    cpuMs: int              # thread CPU one invocation may use (absent: DEFAULT_CPU_MS)
    host: HostPlan
    traceValues: bool
    handlers: list[HandlerRef]
    code: dict[str, JsonObject]   # installation id -> {"hash", "code", "config"}: sent when the engine misses it
    wait: bool              # queue even when the engine is busy (no other engine could take it)


# A handler's status in a chain's trace: the engine's five, then the two the web side gives a handler
# it never sent (quarantined, or its matcher did not hold).
TRACE_STATUSES = ("ran", "cancelled", "error", "timeout", "malformed", "quarantined", "skipped")
# A handler that failed: each is a warning, a strike where it cost time, and its trace says where in the source.
FAILED_STATUSES = frozenset({"error", "timeout", "malformed"})


class TraceEntry(TypedDict, total=False):
    id: str
    status: str             # ran | cancelled | error | timeout | malformed (TRACE_STATUSES)
    changed: bool
    durationMs: float
    warning: str | None
    logs: list[JsonObject]  # {"level", "message", "at"}
    logsDropped: int
    hostCalls: int
    crash: str              # a CrashKind value when the handler cost its isolate
    stateReset: str         # why its module state is new: dropped or lost with an isolate (not its fault)
    context: JsonObject     # the value after this handler (traceValues only)
    at: JsonObject | None   # {"line", "column"} in the compiled code where a thrown error was raised
    hubHeldMs: float        # how long the hub kept a timed-out handler waiting: the engine for its thread, the web process its host calls


class RunResult(TypedDict, total=False):
    """An engine's answer to RUN: exactly one of done / missing / loadError / busy / fatal."""

    op: str
    id: int
    done: bool
    context: JsonObject
    cancellation: JsonObject | None   # {"index", "reason"}
    trace: list[TraceEntry]
    missing: list[str]          # installation ids whose code the engine needs
    loadError: str
    loadCrash: str              # with loadError: a CrashKind value when that load cost the isolate...
    loadCulprit: str            # ...and the installation whose code did it
    busy: bool                  # refused without running: try another engine
    lane: bool                  # ...and it is this account's own chain that keeps the engine busy
    holder: str | None          # ...or this handler is holding the engine in another call of this account
    fatal: str                  # the engine failed, not a handler (a CrashKind value or an exception's name)
    answeredEarly: bool         # inside the engine only: the isolate's thread has sent the answer already


class TierLayout(TypedDict):
    """A supervisor's engines, as web processes find them (the tier.json in its directory)."""

    engines: list[str]     # the shared engines' socket paths
    lane: list[str]        # the lane engines' socket paths
    isolateMemoryMb: int   # their isolates' heap limit, which a web process's private engines take too
    compilers: NotRequired[list[str]]   # the engines that compile (none: the shared engines do)


def result(request_id: Any, **fields: Any) -> bytes:
    return wire.dumps({"op": Op.RESULT.value, "id": request_id, **fields})


# -- inside an engine: a request while it is held, and the chain it runs ------------------------

class Peer(Protocol):
    """The engine's end of the connection a request came in on (engine/process.py's Client)."""

    conn: wire.Frames

    def send(self, message: JsonObject | bytes) -> None: ...

    def send_bytes(self, data: bytes) -> None: ...


@dataclass
class Job:
    """One RUN or BENCH request an engine has taken in, until it is answered."""

    client: Peer
    message: JsonObject   # the request as it arrived (a RunRequest; BENCH adds "n")
    started: float = 0.0

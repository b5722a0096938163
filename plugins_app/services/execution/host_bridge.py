"""The host bridge: answers plugins' host.* calls for one chain run, checking grants first."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from plugins_app.runtime.tables.hooks import HookSpec
from plugins_app.runtime.tables.members import BRIDGED_MEMBERS, OUTWARD_MEMBERS
from plugins_app.runtime.tables.permissions import permission_for
from plugins_app.runtime.web.chain import Handler, HostError
from plugins_app.services.secrets.egress import SecretBox


@dataclass
class HostCall:
    """Everything a host member may need to answer one call."""

    account: Any
    spec: HookSpec
    context: dict
    handler: Handler
    hop: int
    turn_id: str
    extras: dict
    effects: list = field(default_factory=list)
    # How many times this handler has called this member in this chain run, this call included.
    call_number: int = 1
    # False in a try-run: members must not leave audit rows, logs or metering behind.
    record: bool = True
    # The run's secrets: host.fetch injects them, and what they reach is redacted.
    secrets: SecretBox = field(default_factory=lambda: SecretBox(None))
    # True in a try-run, replay or shadow run: writes are stood in (see `member`'s `dry_run`).
    dry_run: bool = False
    # The run's scratch state, shared by all its calls and dropped with it: where a dry run's
    # stood-in writes go, so the same run's reads see them (each member family keeps one key).
    overlay: dict = field(default_factory=dict)
    # Where the bridge lists what a dry run did not do; members that keep state list their writes here.
    would_call: list = field(default_factory=list)

    @property
    def scratch(self) -> dict | None:
        """The run's overlay when it records nothing (try, replay, shadow): members that keep state
        (host.kv) write into it, by their own key, instead of the store; None in a live run."""
        return self.overlay if self.dry_run or not self.record else None


Member = Callable[[HostCall, list], Any]
# Filled by register_members() (from the app's ready()): host member name -> the function answering it.
MEMBERS: dict[str, Member] = {}
# Members that change something outside the chain run, or a test of the call's arguments for those
# that only sometimes do (a fetch that posts): a dry run reports them instead of calling them.
# Filled by register_members() too.
WRITES: dict[str, Callable[[list], bool]] = {}
# What a dry run answers a call it does not make with, unless the member names its own stand-in: an
# object, so plugins that read a field of the answer go on instead of failing on null.
DRY_RUN_ANSWER = {"dryRun": True}
# Filled by register_members(): a member's own stand-in answer (shaped like its real one, marked dryRun).
STAND_INS: dict[str, Any] = {}
# Filled by register_members(): for outward members, which calls are reads an account admin may let a
# replay make for real ("live reads").
LIVE_READS: dict[str, Callable[[list], bool]] = {}
# Filled by register_members(): a member's own way of answering a call a dry run stands in for, in
# place of its fixed stand-in (an overlay write the same run can read back, say).
DRY_RUNS: dict[str, Member] = {}
_MARK = "host_member"


def member(name: str, *, writes: bool | Callable[[list], bool] = False, stand_in: Any = DRY_RUN_ANSWER,
           live_read: Callable[[list], bool] | None = None, dry_run: Member | None = None) -> Callable[[Member], Member]:
    """Mark the function that answers `host.<name>(...)`; `name` must be a bridged member of the table.
    `writes` marks members with side effects (or tests a call's arguments for them); `stand_in` is
    what a dry run answers instead of calling it; `live_read` tests a call of an outward member for
    a plain read an account admin may let a replay or try-run make.

    `dry_run` is the one place a member with side effects decides for itself what a dry run (try,
    replay, shadow) does instead: called with the HostCall and the arguments in place of the member,
    it must act on nothing outside the run; it may keep state in `call.overlay` for the run's later
    calls (the member's reads look there first when `call.dry_run`). Its answer is listed in
    wouldCall as the stand-in. Without it, the fixed `stand_in` is answered."""
    if name not in BRIDGED_MEMBERS:
        raise ValueError(f"host.{name} is not a bridged member in plugins_app/runtime/tables/members.py")
    if live_read is not None and name not in OUTWARD_MEMBERS:
        raise ValueError(f"host.{name}: only an outward member has live reads")

    def mark(fn: Member) -> Member:
        setattr(fn, _MARK, (name, writes, stand_in, live_read, dry_run))
        return fn
    return mark


def marked_members(module: object) -> list[Member]:
    """The functions `module` marked with @member."""
    return [fn for fn in vars(module).values() if callable(fn) and hasattr(fn, _MARK)]


def _always_writes(args: list) -> bool:
    return True


def register_members(functions: list[Member]) -> None:
    """Install the member functions; every bridged member of the table needs exactly one."""
    found: dict[str, Member] = {}
    writes: dict[str, Callable[[list], bool]] = {}
    stand_ins: dict[str, Any] = {}
    live_reads: dict[str, Callable[[list], bool]] = {}
    dry_runs: dict[str, Member] = {}
    for fn in functions:
        name, writing, stand_in, live_read, dry_run = getattr(fn, _MARK)
        if name not in BRIDGED_MEMBERS:
            raise ValueError(f"host.{name} is answered by {fn.__qualname__}, but runtime/tables/members.py "
                             "declares no such bridged member")
        if name in found and found[name] is not fn:
            raise ValueError(f"host.{name} is answered by two functions")
        found[name] = fn
        if writing:
            writes[name] = writing if callable(writing) else _always_writes
        stand_ins[name] = stand_in
        if live_read is not None:
            live_reads[name] = live_read
        if dry_run is not None:
            dry_runs[name] = dry_run
    missing = sorted(BRIDGED_MEMBERS - set(found))
    if missing:
        raise ValueError("host members in runtime/tables/members.py without a function: " + ", ".join(missing))
    MEMBERS.clear()
    MEMBERS.update(found)
    WRITES.clear()
    WRITES.update(writes)
    STAND_INS.clear()
    STAND_INS.update(stand_ins)
    LIVE_READS.clear()
    LIVE_READS.update(live_reads)
    DRY_RUNS.clear()
    DRY_RUNS.update(dry_runs)


def stands_in(name: str, args: list, *, live_reads: bool = False) -> bool:
    """Whether a dry run answers this call from a stand-in: every call that writes, and every call that
    reaches outside the hub (a try-run, replay or shadow run acts on nothing), but for the plain reads
    an account admin asked to make live."""
    if name in WRITES and WRITES[name](args):
        return True
    if name not in OUTWARD_MEMBERS:
        return False
    return not (live_reads and name in LIVE_READS and LIVE_READS[name](args))


class HostBridge:
    def __init__(self, account, spec: HookSpec, context: dict, *, hop: int = 0, turn_id: str = "",
                 extras: dict | None = None, record: bool = True, dry_run: bool = False, live_reads: bool = False):
        self.account, self.spec, self.context = account, spec, context
        self.record = record
        # Calls that write or reach outside are not made, only listed in would_call (stood in); with
        # live_reads (an account admin's choice on a replay), outward plain reads are made for real.
        self.dry_run, self.live_reads = dry_run, live_reads
        self.would_call: list[dict] = []
        self.hop, self.turn_id, self.extras = hop, turn_id, extras or {}
        self.effects: list = []
        self.overlay: dict = {}   # the run's scratch state (HostCall.overlay)
        self.calls: Counter = Counter()
        self.secrets = SecretBox(getattr(account, "pk", None))

    def __call__(self, handler: Handler, name: str, args: list):
        prepared = self.prepare(handler, name, args)
        if isinstance(prepared, StoodIn):
            return prepared.answer()
        fn, call = prepared
        return fn(call, args)

    def prepare(self, handler: Handler, name: str, args: list) -> tuple[Member, HostCall] | StoodIn:
        """Everything of a call but making it (the async bridge makes it its own way): the grant
        checked, the call counted, a dry run's stand-in given, or the member and its HostCall."""
        fn = MEMBERS.get(name)
        if fn is None:
            raise HostError(f"host.{name} is not available in this hub")
        permission = permission_for(name)
        if permission and permission not in handler.granted:
            raise HostError(f"host.{name} needs the {permission} permission, which an account admin "
                            f"has not granted to {handler.plugin}")
        self.calls[handler.installation_id, name] += 1
        call = HostCall(self.account, self.spec, self.context, handler, self.hop, self.turn_id, self.extras,
                        self.effects, self.calls[handler.installation_id, name], self.record, self.secrets,
                        self.dry_run, self.overlay, self.would_call)
        if self.dry_run and stands_in(name, args, live_reads=self.live_reads):
            return StoodIn(self, name, args, call, DRY_RUNS.get(name))
        return fn, call


@dataclass(frozen=True)
class StoodIn:
    """A call a dry run does not make: answered by the member's own `dry_run` function when it has one
    (which may read the database: the async bridge calls it on a host thread), else by its fixed
    stand-in; either answer is listed in the run's wouldCall."""

    bridge: HostBridge
    name: str
    args: list
    call: HostCall
    own: Member | None

    def answer(self) -> Any:
        # The member's own answer may raise HostError, as the member would (a write over the quota).
        name, args = self.name, self.args
        found = self.own(self.call, args) if self.own is not None else copy.deepcopy(STAND_INS.get(name, DRY_RUN_ANSWER))
        handler = self.call.handler
        self.bridge.would_call.append({"installationId": handler.installation_id, "plugin": handler.plugin,
                                       "member": f"host.{name}", "args": args, "standIn": found})
        return found

"""The one seam every chain run goes through: checked, bridged, run, scrubbed, traced, counted, recorded.

Three steps, so an async caller can await the middle one without a thread:
`prepare` (sync, the database: the context checked, the handlers loaded and swapped, the host bridge
made with the mode's rules, the probes opened), the engine run (the only long wait: `run` here, or
an async link awaiting the same `run_args`), and `finish` (sync, the database: the secret scrub,
the audit rows and after-chain observers of a live run, the probes closed). `invoke` calls the three.
The probes (the tracing span, the metrics) are added once by the app's ready(), like the after-chain
observers; a run made before they are wired is refused, so no caller can go without them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from django.conf import settings

from plugins_app.errors import InvalidInput
from plugins_app.runtime.matching.evaluate import holds
from plugins_app.runtime.tables.context import MAX_ID_LENGTH, ContextError, validate_context
from plugins_app.runtime.tables.hooks import HookSpec
from plugins_app.runtime.web.async_chain import run_chain_async
from plugins_app.runtime.web.chain import (
    SKIPPED,
    ChainResult,
    Handler,
    HandlerTrace,
    SlowHandler,
    nothing_to_run,
    run_chain,
)
from plugins_app.services.engine.tier import engine_key, get_async_tier, get_tier
from plugins_app.services.execution import quarantine
from plugins_app.services.execution.async_host_bridge import AsyncHostBridge, in_host_thread
from plugins_app.services.execution.chain_cache import chain_cache, shadow_key
from plugins_app.services.execution.host_bridge import HostBridge
from plugins_app.services.execution.record import record_result
from plugins_app.services.hooks import require_hook

HOP_LIMIT = 64   # the highest `hop` an execute call may carry (the platform counts relays)
HandlerSwap = Callable[[list[Handler]], list[Handler]]


class Mode(StrEnum):
    LIVE = "live"       # the platform's calls, cron, timers, SSH, peer messages: recorded
    TRY = "try"         # a try-run: stand-ins for calls that write or reach out, nothing recorded, values kept
    REPLAY = "replay"   # a cancel-log entry or recorded call again, a check: stand-ins for calls that write or reach out, values kept
    SHADOW = "shadow"   # a shadow handler at its place, on a copy of the input there: stand-ins, nothing recorded


@dataclass(frozen=True)
class Rules:
    record: bool         # audit rows, after-chain observers, strikes and lane moves; members may write rows
    dry_run: bool        # host calls that write or reach outside the hub are answered by stand-ins
    trace_values: bool   # each handler's resulting value in its trace entry


RULES = {
    Mode.LIVE: Rules(record=True, dry_run=False, trace_values=False),
    # A try-run is an admin's experiment on a sample: like a replay it acts on nothing (docs/api.md).
    Mode.TRY: Rules(record=False, dry_run=True, trace_values=True),
    Mode.REPLAY: Rules(record=False, dry_run=True, trace_values=True),
    Mode.SHADOW: Rules(record=False, dry_run=True, trace_values=False),
}


class Probe(Protocol):
    """What a probe opened for one run does at its end (a span, a timer)."""

    def finish(self, invocation: Invocation) -> None: ...

    def fail(self, invocation: Invocation, exc: BaseException) -> None: ...

    def headers(self) -> dict[str, str]: ...


OpenProbe = Callable[["Invocation"], Probe]


class Probes:
    """The probes every run opens, in the order added (from the app's ready(): tracing, metrics)."""

    def __init__(self) -> None:
        self._openers: dict[str, OpenProbe] = {}

    def add(self, name: str, opener: OpenProbe) -> None:
        self._openers[name] = opener   # by name: a second ready() (tests) replaces, never doubles

    def names(self) -> list[str]:
        return list(self._openers)

    def open(self, invocation: Invocation) -> list[Probe]:
        if not self._openers:
            raise RuntimeError("the invocation probes are not wired: PluginsAppConfig.ready() adds them")
        return [opener(invocation) for opener in self._openers.values()]


probes = Probes()


@dataclass
class Invocation:
    """One run of an account's chain for a hook, from prepare to finish."""

    account: Any
    hook: str                   # as asked (an unknown one is refused by prepare, and counted)
    mode: Mode
    origin: str                 # who asked: api, cron, timer, ssh, session, command, try, replay, shadow
    traceparent: str | None = None
    spec: HookSpec | None = None
    context: dict = field(default_factory=dict)   # the checked context the chain starts from
    hop: int = 0
    turn_id: str = ""
    handlers: list[Handler] = field(default_factory=list)
    # Handlers whose matcher did not hold for the context: left out before the engine, in the trace as skipped.
    unmatched: dict[str, HandlerTrace] = field(default_factory=dict)
    bridge: HostBridge | None = None
    result: ChainResult | None = None
    started: float = field(default_factory=time.perf_counter)
    chain_ms: float = 0.0       # prepare to finish, as Server-Timing's `chain` says
    probes: list[Probe] = field(default_factory=list)
    closed: bool = False
    trace_values: bool = False  # each handler's value in its trace: the mode asks, or a shadow compares at a place

    @property
    def rules(self) -> Rules:
        return RULES[self.mode]

    @property
    def effects(self) -> list:
        """What the chain's host calls asked the platform for (never delivered by a dry run)."""
        return self.bridge.effects if self.bridge is not None else []

    @property
    def would_call(self) -> list:
        """A dry run's stood-in calls, then its effects, with granted secrets' values redacted."""
        if self.bridge is None:
            return []
        return self.bridge.secrets.redactor.data(self.bridge.would_call) + [{"effect": e} for e in self.effects]

    def headers(self) -> dict[str, str]:
        """The probes' response headers (the tracing span's `traceresponse`)."""
        found: dict[str, str] = {}
        for probe in self.probes:
            found.update(probe.headers())
        return found

    def run_args(self) -> dict[str, Any]:
        """What the engine run takes besides the tier (run_chain's, or an async link's, arguments)."""
        assert self.spec is not None and self.bridge is not None, "prepare() first"
        rules = self.rules
        on_slow: SlowHandler | None = None
        if rules.record:
            account = self.account

            def on_slow(handler: Handler) -> None:
                _held_the_isolate(account, handler)
        runnable = [h for h in self.handlers if h.installation_id not in self.unmatched]
        return {"account_key": engine_key(self.account), "spec": self.spec, "handlers": runnable,
                "context": self.context, "host": self.bridge, "hop": self.hop,
                "trace_values": self.trace_values, "budget_ms": settings.HUB_ENGINE.budget_ms,
                "cpu_ms": settings.HUB_ENGINE.cpu_ms, "on_slow": on_slow}


def unmatched(spec: HookSpec, handlers: list[Handler], context: dict) -> dict[str, HandlerTrace]:
    """The handlers whose plugin's matcher does not hold for `context` (the context the chain starts
    from), each with its trace entry. A quarantined one is left to the chain runner, which says so."""
    now, found = time.time(), {}
    for h in handlers:
        matcher = h.matchers.get(spec.name)
        if not matcher or h.quarantined(now):
            continue
        if not holds(matcher, context):
            # No warning: a matcher that does not hold is the plugin's own choice, not a failure
            # (explain says which condition failed).
            found[h.installation_id] = HandlerTrace(h.installation_id, h.plugin, SKIPPED, False, 0.0, reason="match")
    return found


def _engine_free(handlers: list[Handler]) -> bool:
    # No handler left to run (none matched, or every one is quarantined): answered here, with no
    # engine round trip (and no engine started in a process that has none yet).
    now = time.time()
    return all(h.quarantined(now) for h in handlers)


def _with_unmatched(invocation: Invocation) -> list[HandlerTrace]:
    """The trace in chain order with the skipped handlers in their places; in a run that keeps values,
    a skipped one's value is the value it was passed (what the handler before it left)."""
    assert invocation.result is not None and invocation.spec is not None
    ran = {t.installation_id: t for t in invocation.result.trace}
    keep = invocation.rules.trace_values
    value, merged = (invocation.spec.value_of(invocation.context) if keep else None), []
    for h in invocation.handlers:
        entry = ran.pop(h.installation_id, None) or invocation.unmatched.get(h.installation_id)
        if entry is None:
            continue
        if entry.status == SKIPPED and keep:
            entry = dataclasses.replace(entry, value=value)
        merged.append(entry)
        value = entry.value
    return merged + list(ran.values())


def _held_the_isolate(account, handler: Handler) -> None:
    # Heard while the chain still runs: from the next call on, in every process, this
    # installation runs in the lane, so it can't hold up the engines other accounts share.
    quarantine.mark_slow_lane(account.pk, handler.installation_id,
                              "held its engine's isolate for over half a second without yielding")


# -- the three steps ---------------------------------------------------------------------------------

def open_invocation(account, hook: str, *, mode: Mode = Mode.LIVE, origin: str = "api",
                    traceparent: str | None = None) -> Invocation:
    """The run's record with its probes open (the span started, the clock running): a call refused
    from here on is still traced and counted. prepare() does this; the execute API's body check
    comes between the two."""
    invocation = Invocation(account, hook, Mode(mode), origin, traceparent)
    invocation.probes = probes.open(invocation)
    return invocation


def prepare(account, hook: str, context, *, mode: Mode = Mode.LIVE, origin: str = "api", hop: int = 0,
            turn_id: str = "", extras: dict | None = None, swap: HandlerSwap | None = None,
            handlers: list[Handler] | None = None, live_reads: bool = False, traceparent: str | None = None,
            bad_context: Callable[[ContextError], Exception] | None = None,
            invocation: Invocation | None = None, asynchronous: bool = False) -> Invocation:
    """Sync, the database. Checks `hop`, `turn_id` and the context against the hook's table, loads the
    account's handlers for it (or takes `handlers`), applies `swap` (drafts or versions in place of live
    code), sets aside the handlers whose plugin's matcher does not hold for the context (skipped before
    the engine, traced `skipped`, reason "match"), and builds the host bridge with the mode's rules
    (`live_reads`: a replay's or try-run's plain GET/HEAD fetches made for real). `bad_context` turns a
    context that does not fit into the caller's error.
    `asynchronous`: the run will be awaited (run_async), so the bridge answers host calls as coroutines."""
    invocation = invocation or open_invocation(account, hook, mode=mode, origin=origin, traceparent=traceparent)
    with failing(invocation):
        spec = require_hook(hook)
        if isinstance(hop, bool) or not isinstance(hop, int) or not 0 <= hop <= HOP_LIMIT:
            raise InvalidInput("hop", f"expected an integer from 0 to {HOP_LIMIT}")
        if not isinstance(turn_id, str) or len(turn_id) > MAX_ID_LENGTH:   # may be empty: no turn
            raise InvalidInput("turnId", f"expected a string of at most {MAX_ID_LENGTH} characters")
        try:
            clean = validate_context(spec, context)
        except ContextError as exc:
            if bad_context is not None:
                raise bad_context(exc) from None
            field_name = f"context.{exc.field}" if exc.field != "context" else "context"
            raise InvalidInput(field_name, exc.message) from None
        chain = list(handlers) if handlers is not None else chain_cache.handlers(account, hook)
        if swap is not None:
            chain = swap(chain)
        rules = invocation.rules
        invocation.spec, invocation.context, invocation.hop, invocation.turn_id = spec, clean, hop, turn_id
        invocation.handlers = chain
        # A live run of a hook something shadows keeps each handler's value: the shadow run then gives
        # each candidate the input its place saw and compares with what the live code made of it.
        invocation.trace_values = rules.trace_values or (
            rules.record and bool(chain_cache.handlers(account, shadow_key(spec.name))))
        invocation.unmatched = unmatched(spec, chain, clean)
        bridge = AsyncHostBridge if asynchronous else HostBridge
        invocation.bridge = bridge(account, spec, clean, hop=hop, turn_id=turn_id, extras=extras,
                                   record=rules.record, dry_run=rules.dry_run,
                                   live_reads=live_reads and rules.dry_run)
    return invocation


def run(invocation: Invocation) -> ChainResult:
    """The engine run, in this thread (the only long wait: the engine, and the host calls it asks)."""
    with failing(invocation):
        args = invocation.run_args()
        if _engine_free(args["handlers"]):
            invocation.result = nothing_to_run(args["spec"], args["handlers"], args["context"], args["trace_values"])
        else:
            invocation.result = run_chain(get_tier(), args.pop("account_key"), args.pop("spec"), args.pop("handlers"),
                                          args.pop("context"), **args)
    return invocation.result


async def run_async(invocation: Invocation) -> ChainResult:
    """The engine run awaited on the event loop (prepare(..., asynchronous=True) first): no thread is
    held while the engine runs or a network host call (fetch, llm, decide) waits; the database's
    members, and a slow handler's lane move, run on the async bridge's small pool of host threads."""
    with failing(invocation):
        args = invocation.run_args()
        if _engine_free(args["handlers"]):
            invocation.result = nothing_to_run(args["spec"], args["handlers"], args["context"], args["trace_values"])
            return invocation.result
        bridge, on_slow = args.pop("host"), args.pop("on_slow")
        if not isinstance(bridge, AsyncHostBridge):
            raise TypeError("run_async needs a run prepared with asynchronous=True")
        slow = None
        if on_slow is not None:
            sync_slow = on_slow

            async def slow(handler: Handler) -> None:
                await in_host_thread(sync_slow, handler)
        invocation.result = await run_chain_async(
            get_async_tier(), args.pop("account_key"), args.pop("spec"), args.pop("handlers"), args.pop("context"),
            host=bridge.answer, on_slow=slow, **args)
    return invocation.result


def finish(invocation: Invocation, result: ChainResult | None = None) -> Invocation:
    """Sync, the database. Replaces any granted secret's value in the result (before anything is recorded
    or answered), records a live run (audit rows, then every after-chain observer) and closes the probes."""
    with failing(invocation):
        if result is not None:
            invocation.result = result
        assert invocation.result is not None and invocation.bridge is not None and invocation.spec is not None
        if invocation.unmatched:
            invocation.result.trace = _with_unmatched(invocation)
        invocation.bridge.secrets.scrub(invocation.result, invocation.handlers)
        if invocation.rules.record:
            record_result(invocation.account, invocation.spec, invocation.context, invocation.result,
                          hop=invocation.hop, turn_id=invocation.turn_id,
                          versions={h.installation_id: h.version for h in invocation.handlers})
    invocation.chain_ms = (time.perf_counter() - invocation.started) * 1000
    _close(invocation, None)
    return invocation


def invoke(account, hook: str, context, *, mode: Mode = Mode.LIVE, origin: str = "api", **options) -> Invocation:
    """Run the account's chain for `hook` in `mode`: prepare, run, finish (see prepare for `options`)."""
    invocation = prepare(account, hook, context, mode=mode, origin=origin, **options)
    run(invocation)
    return finish(invocation)


@contextlib.contextmanager
def failing(invocation: Invocation) -> Iterator[None]:
    """Around a step: an exception closes the probes as failed (the span errs, the call is counted)."""
    try:
        yield
    except BaseException as exc:
        invocation.chain_ms = (time.perf_counter() - invocation.started) * 1000
        _close(invocation, exc)
        raise


def _close(invocation: Invocation, exc: BaseException | None) -> None:
    if invocation.closed:
        return
    invocation.closed = True
    for probe in invocation.probes:
        if exc is None:
            probe.finish(invocation)
        else:
            probe.fail(invocation, exc)

"""The live tail: each recorded chain run as events (handler runs, logs, warnings, the cancel), published
to the account's channel while someone listens, and the filtered stream `GET /api/v1/tail` serves."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from plugins_app.errors import InvalidInput, TooManyRequests
from plugins_app.runtime.protocol import FAILED_STATUSES, TRACE_STATUSES
from plugins_app.runtime.tables.hooks import HOOK_NAMES
from plugins_app.services.execution.observers import ChainRun
from plugins_app.services.observability import tail_channel, tail_slots

EVENTS_PER_SECOND = 200   # per account and process: every event up to this rate; beyond, counted as dropped
MAX_STREAMS_PER_PROCESS = 8   # of gunicorn's 16 threads a worker has: the rest stay for execute calls
MAX_STREAMS_PER_MACHINE = 16   # every web process of the machine together (a slot file in HUB_TAIL_DIR)
# One account's share, of a process's streams and of the machine's: at most half, and never the last free
# ones while it holds one (tail_slots.Share); so two accounts can't hold every slot.
PROCESS_SHARE = tail_slots.Share.of(MAX_STREAMS_PER_PROCESS)
MAX_STREAMS_PER_ACCOUNT = PROCESS_SHARE.per_account   # in one process
KEEPALIVE_SECONDS = 5.0   # an idle stream sends a comment this often (and so notices a gone client)

log = logging.getLogger(__name__)

_channel: tail_channel.Channel | None = None
_channel_lock = threading.Lock()


def get_channel() -> tail_channel.Channel:
    global _channel
    with _channel_lock:
        if _channel is None:
            config = settings.HUB_TAIL
            _channel = (tail_channel.RedisChannel(config.redis_url, config.redis_timeout_seconds,
                                                  config.redis_retry_seconds) if config.channel == "redis"
                        else tail_channel.FileChannel(config.directory))
        return _channel


def reset_channel() -> None:
    """Forget the channel (tests that change settings.HUB_TAIL)."""
    global _channel
    with _channel_lock:
        _channel = None


class _Budget:
    """A token bucket per account: EVENTS_PER_SECOND, one second's worth of burst; what it refuses is
    counted and announced with the next event that gets through."""

    def __init__(self) -> None:
        self._state: dict[int, list[float]] = {}   # account -> [tokens, last refill, dropped]
        self._lock = threading.Lock()

    def take(self, account_id: int, wanted: int) -> tuple[int, int]:
        """(events allowed now, events dropped before that must be reported)."""
        now = time.monotonic()
        with self._lock:
            tokens, last, dropped = self._state.get(account_id, [float(EVENTS_PER_SECOND), now, 0.0])
            tokens = min(float(EVENTS_PER_SECOND), tokens + (now - last) * EVENTS_PER_SECOND)
            allowed = min(wanted, int(tokens))
            report = int(dropped) if allowed else 0
            dropped = (0 if allowed else dropped) + wanted - allowed
            self._state[account_id] = [tokens - allowed, now, dropped]
        return allowed, report


_budget = _Budget()


def events_of(run: ChainRun) -> list[dict[str, Any]]:
    """A run's events: per handler its logs (written while it ran), its run, its warning; then the cancel,
    if any. The order is the order things happened in, which a reader of the tail takes it for."""
    at = round(time.time(), 3)
    hook = run.spec.name
    events: list[dict[str, Any]] = []
    for t in run.result.trace:
        base = {"at": at, "hook": hook, "plugin": t.plugin, "installationId": t.installation_id,
                "status": t.status, "version": run.versions.get(t.installation_id)}
        for log in t.logs:
            if isinstance(log, dict):
                events.append({"type": "log", **base, "level": log.get("level"), "message": log.get("message")})
        events.append({"type": "run", **base, "durationMs": round(t.duration_ms, 3), "changed": t.changed})
        if t.status in FAILED_STATUSES or t.warning:
            events.append({"type": "warning", **base, "message": t.warning or t.status})
    c = run.result.cancellation
    if c is not None:
        events.append({"type": "cancel", "at": at, "hook": hook, "plugin": c.plugin,
                       "installationId": c.installation_id, "status": "cancelled", "reason": c.reason,
                       "version": run.versions.get(c.installation_id), "turnId": run.turn_id})
    return events


def observe_chain(run: ChainRun) -> None:
    """The after-chain observer: publishes a run's events while the account is tailed."""
    account_id = run.account.pk
    channel = get_channel()
    if not channel.listening(account_id):
        return
    events = events_of(run)
    allowed, dropped = _budget.take(account_id, len(events))
    if not allowed:
        return
    head = [{"type": "dropped", "at": round(time.time(), 3), "count": dropped}] if dropped else []
    channel.publish(account_id, head + events[:allowed])


@dataclass(frozen=True)
class Filters:
    plugin: str = ""
    hook: str = ""
    statuses: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, params) -> Filters:
        hook = params.get("hook", "")
        if hook and hook not in HOOK_NAMES:
            raise InvalidInput("hook", f"unknown hook {hook!r}; the hooks are: {', '.join(HOOK_NAMES)}")
        statuses = frozenset(s for s in params.get("status", "").split(",") if s)
        unknown = sorted(statuses - set(TRACE_STATUSES))
        if unknown:
            raise InvalidInput("status", f"{unknown[0]!r} is not a status; expected: {', '.join(TRACE_STATUSES)}")
        return cls(params.get("plugin", ""), hook, statuses)

    def allows(self, event: dict) -> bool:
        if event.get("type") == "dropped":
            return True
        return ((not self.plugin or event.get("plugin") == self.plugin)
                and (not self.hook or event.get("hook") == self.hook)
                and (not self.statuses or event.get("status") in self.statuses))


_open: dict[int, int] = {}
_open_lock = threading.Lock()
_machine: tail_slots.MachineSlots | None = None
_warned = False


def machine_slots() -> tail_slots.MachineSlots:
    """The machine's slots: a file every web process of the machine opens (whatever the channel)."""
    global _machine
    directory = Path(settings.HUB_TAIL.directory)
    path = directory / "slots.lock"
    with _open_lock:
        if _machine is None or _machine.path != str(path):
            directory.mkdir(parents=True, exist_ok=True)
            _machine = tail_slots.MachineSlots(path, MAX_STREAMS_PER_MACHINE)
        return _machine


def _admit(account_id: int) -> tail_slots.Slot:
    with _open_lock:
        reason = PROCESS_SHARE.refusal(_open.get(account_id, 0), sum(_open.values()))
        if reason:
            raise TooManyRequests(reason)
        _open[account_id] = _open.get(account_id, 0) + 1
    try:
        return machine_slots().take(account_id)
    except tail_slots.Refused as exc:
        _release(account_id)
        raise TooManyRequests(str(exc)) from None
    except OSError as exc:   # no slot file (HUB_TAIL_DIR unusable): the process's bounds still hold
        global _warned
        if not _warned:
            _warned = True
            log.warning("live tail: the machine's slots file in %s can't be used (%s); each web process "
                        "bounds its own streams only", settings.HUB_TAIL.directory, exc)
        return tail_slots.Slot(None)
    except BaseException:
        _release(account_id)
        raise


def _release(account_id: int) -> None:
    with _open_lock:
        _open[account_id] = max(0, _open.get(account_id, 0) - 1)


def open_stream(account_id: int, filters: Filters) -> TailStream:
    """The account's events as they happen, filtered. Checked and admitted now (a refusal is an error
    answer); iterating it streams until max_seconds; closing it (Django does when the response ends,
    streamed or not) gives its place back."""
    slot = _admit(account_id)
    try:
        subscription = get_channel().subscribe(account_id)
    except Exception:
        slot.close()
        _release(account_id)
        raise
    return TailStream(account_id, subscription, filters, slot)


class TailStream:
    """Events (dicts) and keepalives (None) of one stream."""

    def __init__(self, account_id: int, subscription: tail_channel.Subscription, filters: Filters,
                 slot: tail_slots.Slot | None = None):
        self.account_id, self.subscription, self.filters, self.slot = account_id, subscription, filters, slot
        self._closed = False
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[dict | None]:
        ends = time.monotonic() + settings.HUB_TAIL.max_seconds
        try:
            # Publishers remember "nobody listens" for up to CHECK_CACHE_SECONDS: from then on every
            # process publishes, so `ready` is a promise that nothing after it is missed.
            time.sleep(tail_channel.CHECK_CACHE_SECONDS)
            yield {"type": "ready", "at": round(time.time(), 3), "maxSeconds": settings.HUB_TAIL.max_seconds}
            while time.monotonic() < ends:
                events = [e for e in self.subscription.read(min(KEEPALIVE_SECONDS, ends - time.monotonic()))
                          if self.filters.allows(e)]
                if not events:
                    yield None
                yield from events
        finally:
            self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.subscription.close()
        if self.slot is not None:
            self.slot.close()
        _release(self.account_id)

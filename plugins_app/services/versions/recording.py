"""Recorded calls: each account keeps a bounded, redacted sample of its recent execute calls per hook
(the context as received, the versions that ran, the outcome), for checks to run versions against.

An after-chain observer adds the call to a buffer (a list append under a lock, on the request path);
the buffered writer's thread redacts, writes and prunes in batches off it, like metering. A batch that
fails is written call by call, and a call that still fails is kept for the next flush (for MAX_TRIES
flushes: a value the database can never store is let go then, logged); otherwise only the bounds drop
a call."""

from __future__ import annotations

import itertools
import logging
from collections import defaultdict
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from accounts.buffered import BufferedWriter
from plugins_app.errors import InvalidInput
from plugins_app.models import RecordedCall
from plugins_app.services.audit.queries import common
from plugins_app.services.execution.observers import ChainRun
from plugins_app.services.secrets.egress import account_redactor
from plugins_app.services.versions.config import RecordingConfig

logger = logging.getLogger(__name__)
OUTCOMES = ("unchanged", "changed", "cancelled")
MAX_TRIES = 30   # flushes (2 s apart by default: a minute) a call the database refuses is kept for


def config() -> RecordingConfig:
    return getattr(settings, "HUB_RECORDING", RecordingConfig())


class Recorder(BufferedWriter):
    """Pending calls keyed by a running number; a (account, hook) never holds more pending than its bound
    (older ones would be pruned on arrival anyway)."""

    thread_name = "hub-recorded-calls"

    def __init__(self) -> None:
        super().__init__()
        self._numbers = itertools.count()

    def add(self, run: ChainRun) -> None:
        bound = config().per_hook
        if bound <= 0:
            return
        result = run.result
        c = result.cancellation
        call = {"account_id": run.account.pk, "hook": run.spec.name, "context": run.context, "hop": run.hop,
                "turn_id": run.turn_id, "versions": {k: v for k, v in run.versions.items() if v is not None},
                "outcome": result.outcome, "value": result.value,
                "cancelled_by": c.plugin if c else "", "reason": c.reason[:500] if c else "",
                "created_at": timezone.now()}
        with self._lock:
            self._pending[next(self._numbers)] = call
        self.added()

    def prepare(self, batch: list[tuple[Any, Any]]) -> list[RecordedCall]:
        """The rows, redacted with every secret of their account (read before the write transaction)."""
        bound = config().per_hook
        newest: dict[tuple[int, str], list[dict]] = defaultdict(list)
        for _, call in sorted(batch, key=lambda kv: kv[0]):
            newest[(call["account_id"], call["hook"])].append(call)
        redactors = {account_id: account_redactor(account_id) for account_id, _ in newest}
        rows = []
        for (account_id, _hook), calls in newest.items():
            redactor = redactors[account_id]
            for call in calls[-bound:] if bound > 0 else []:
                call = {k: v for k, v in call.items() if k != "tries"}
                rows.append(RecordedCall(**{**call, "context": redactor.data(call["context"]),
                                            "value": redactor.data(call["value"]),
                                            "reason": redactor.text(call["reason"])}))
        return rows

    def write_many(self, prepared: list[RecordedCall]) -> None:
        RecordedCall.objects.bulk_create(prepared)
        for account_id, hook in {(r.account_id, r.hook) for r in prepared}:
            prune(account_id, hook)

    def keep(self, key, value) -> None:
        # A call the database refused this many flushes running (a value it can never store) is let go,
        # logged, rather than tried forever; a passing outage is far shorter than that.
        tries = value.get("tries", 0) + 1
        if tries >= MAX_TRIES:
            logger.error("a recorded %s call of account %s could not be written in %d tries; dropped",
                         value["hook"], value["account_id"], tries)
            return
        with self._lock:
            self._pending[key] = {**value, "tries": tries}


recorder = Recorder()


def observe_chain(run: ChainRun) -> None:
    """An after-chain observer: the live call joins its account's recorded calls."""
    recorder.add(run)


def oldest_kept():
    return timezone.now() - timedelta(days=config().days)


def prune(account_id: int, hook: str) -> int:
    """Drops the account's calls of `hook` past the count and age bounds; returns how many."""
    qs = RecordedCall.objects.filter(account_id=account_id, hook=hook)
    expired, _ = qs.filter(created_at__lt=oldest_kept()).delete()
    extra = list(qs.order_by("-created_at", "-id").values_list("pk", flat=True)[config().per_hook:])
    if extra:
        RecordedCall.objects.filter(pk__in=extra).delete()
    return expired + len(extra)


def prune_expired() -> int:
    """Drops every account's calls older than the age bound, hooks that get no calls any more included
    (beat's task, every PRUNE_EVERY_SECONDS; a write prunes only its own account's hook)."""
    deleted, _ = RecordedCall.objects.filter(created_at__lt=oldest_kept()).delete()
    return deleted


def recorded_calls(account, params) -> QuerySet[RecordedCall]:
    """The account's recorded calls within the age bound, newest first; filters: hook, since, until, outcome."""
    qs = common(RecordedCall.objects.filter(account=account, created_at__gte=oldest_kept()),
                {name: params.get(name) for name in ("hook", "since", "until")})   # no plugin field here
    if params.get("outcome"):
        if params["outcome"] not in OUTCOMES:
            raise InvalidInput("outcome", "expected one of " + ", ".join(OUTCOMES))
        qs = qs.filter(outcome=params["outcome"])
    return qs.order_by("-created_at", "-id")


def latest(account, hook: str, count: int) -> list[RecordedCall]:
    """The newest `count` recorded calls of `hook`, oldest first (the order they were received)."""
    rows = list(RecordedCall.objects.filter(account=account, hook=hook, created_at__gte=oldest_kept())
                .order_by("-created_at", "-id")[:count])
    rows.reverse()
    return rows

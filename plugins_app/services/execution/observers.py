"""The one seam after a recorded chain run: observers (strikes, metering, latency, metrics, logs,
shadow runs) are added once by the app's ready() and each hears every run."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from plugins_app.runtime.tables.hooks import HookSpec
from plugins_app.runtime.web.chain import ChainResult
from plugins_app.services.log_once import OncePerInterval

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChainRun:
    """One recorded run of an account's chain, as its observers see it."""

    account: Any
    spec: HookSpec
    context: dict          # the checked context the chain started from
    result: ChainResult
    hop: int
    turn_id: str
    versions: Mapping[str, int] = field(default_factory=dict)   # installation id -> the version that ran


Observer = Callable[[ChainRun], None]


class AfterChain:
    """Calls each observer in the order added. One observer's failure is logged and the rest still
    hear the run: a metering outage must not cost the run its logs or its strikes."""

    def __init__(self) -> None:
        self._observers: dict[str, Observer] = {}
        # An observer that fails fails on every call while its part is away: a line per kind per interval.
        self._failures = OncePerInterval(logger)

    def add(self, name: str, observer: Observer) -> None:
        self._observers[name] = observer   # by name: a second ready() (tests) replaces, never doubles

    def remove(self, name: str) -> None:
        self._observers.pop(name, None)

    def names(self) -> list[str]:
        return list(self._observers)

    def notify(self, run: ChainRun) -> None:
        for name, observer in list(self._observers.items()):
            try:
                observer(run)
            except Exception as exc:
                self._failures.log((name, type(exc).__name__), logging.ERROR,
                              "the after-chain observer %r failed on a %s run of account %s (%s: %s)", name,
                              run.spec.name, getattr(run.account, "pk", None), type(exc).__name__, exc,
                              exc_info=True)


after_chain = AfterChain()

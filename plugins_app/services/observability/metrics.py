"""Prometheus metrics: what the execute path, handlers, quarantine and Celery count, and the scrape."""

from __future__ import annotations

import atexit
import hmac
import ipaddress
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.conf import settings
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY

from plugins_app.errors import HubError
from plugins_app.runtime.environment import Env
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import NOT_RUN
from plugins_app.services.engine.tier import get_tier
from plugins_app.services.execution.observers import ChainRun

logger = logging.getLogger(__name__)
OTHER = "other"
SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

EXECUTE_REQUESTS = Counter("hub_execute_requests", "Execute API calls by hook and outcome", ["hook", "outcome"])
EXECUTE_SECONDS = Histogram("hub_execute_duration_seconds", "Time the hub spent answering an execute call",
                            ["hook", "outcome"], buckets=SECONDS_BUCKETS)
CHAIN_RUNS = Counter("hub_chain_runs", "Chain runs of every caller, by hook, mode (live, try, replay, shadow), "
                     "origin (api, cron, timer, ssh, session, command, try, replay, shadow) and outcome",
                     ["hook", "mode", "origin", "outcome"])
CHAIN_RUN_SECONDS = Histogram("hub_chain_run_duration_seconds", "Time a chain run took, prepare to finish",
                              ["hook", "mode", "origin"], buckets=SECONDS_BUCKETS)
HANDLER_SECONDS = Histogram("hub_handler_duration_seconds", "Handler run time by plugin and hook",
                            ["plugin", "hook"], buckets=SECONDS_BUCKETS)
HANDLER_RUNS = Counter("hub_handler_runs", "Handlers by plugin and status (quarantined: skipped)",
                       ["plugin", "status"])
ENGINE_RESTARTS = Counter("hub_engine_restarts", "Isolates or engines lost to a handler, by crash kind", ["kind"])
HANDLER_SKIPPED = Counter("hub_handler_skipped", "Handlers left out before the engine, by reason (match: the "
                          "plugin's matcher did not hold for the context)", ["reason"])
KV_CALLS = Counter("hub_kv_calls", "host.kv calls by member (get, put, delete, list, incr) and outcome: ok; "
                   "refused (incr at its max); rejected (bad input, quota); dry (a try, replay or shadow run's, "
                   "answered without writing)", ["member", "outcome"])
QUARANTINES = Counter("hub_quarantines", "Installations put in quarantine")
CELERY_TASKS = Counter("hub_celery_tasks", "Celery tasks by name and outcome", ["task", "outcome"])
TASKS_QUEUED = Counter("hub_tasks_queued", "Tasks handed to the broker, by name and outcome: sent; spooled "
                       "(the broker was away: kept on disk); resent (from the spool); lost (not even the disk "
                       "took it)", ["task", "outcome"])
ADMISSION_WAIT_SECONDS = Histogram("hub_admission_wait_seconds",
                                   "Time an execute call waited for its account's turn in its web process",
                                   buckets=(0.0,) + SECONDS_BUCKETS)
ADMISSION_REST_SECONDS = Counter("hub_admission_rest_seconds",
                                 "Time calls of accounts calling from several connections at once kept "
                                 "their account's machine place resting beside other accounts")
ADMISSION_SHED = Counter("hub_admission_shed", "Execute and try calls answered 503 because they could not start "
                         "within the queue deadline (HUB_EXECUTE_QUEUE_DEADLINE_MS)")


class _BoundedLabel:
    """The first `limit` distinct values seen by this process keep their name; later ones are
    counted as "other", so a flood of new plugin names cannot grow the series without end."""

    def __init__(self, limit: Callable[[], int]):
        self.limit = limit
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self.seen:
            return value
        with self.lock:
            if len(self.seen) >= self.limit():
                return OTHER
            self.seen.add(value)
            return value


plugin_label = _BoundedLabel(lambda: settings.HUB_METRICS.max_plugins)


def hook_label(hook: str) -> str:
    return hook if hook in HOOKS else "unknown"   # an unknown hook in a URL is the caller's text


class _Deferred:
    """Observations queued by request threads (an append) and applied to the metrics by a thread
    of this process every HUB_METRICS_FLUSH_SECONDS: with multiprocess mode each increment is a
    locked write to a memory-mapped file, kept off the execute path. 0 applies them at once."""

    def __init__(self) -> None:
        self.queue: deque = deque()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.children: dict[tuple, object] = {}   # (metric, labels) -> its child, skipping labels()

    @property
    def interval(self) -> float:
        return settings.HUB_METRICS.flush_seconds

    def add(self, item: tuple) -> None:
        self.queue.append(item)
        if self.interval <= 0:
            self.apply()
        elif self.thread is None or not self.thread.is_alive():
            self._start()

    def child(self, metric: Any, *labels: str) -> Any:
        key = (metric, labels)
        found = self.children.get(key)
        if found is None:
            found = self.children[key] = metric.labels(*labels)
        return found

    def apply(self) -> None:
        with self.lock:   # one applier at a time: children are made once
            while self.queue:
                kind, *args = self.queue.popleft()
                try:
                    if kind == "admission":
                        ADMISSION_WAIT_SECONDS.observe(*args)
                    elif kind == "rest":
                        ADMISSION_REST_SECONDS.inc(*args)
                    elif kind == "shed":
                        ADMISSION_SHED.inc()
                    else:
                        (self._apply_chain if kind == "chain" else self._apply_call)(*args)
                except Exception:
                    logger.exception("a metrics observation could not be applied")

    def _apply_chain(self, hook: str, entries) -> None:
        for plugin, status, duration_ms, crash, reason in entries:
            plugin = plugin_label(plugin)
            self.child(HANDLER_RUNS, plugin, status).inc()
            if reason:
                self.child(HANDLER_SKIPPED, reason).inc()
            if status not in NOT_RUN:
                self.child(HANDLER_SECONDS, plugin, hook).observe(duration_ms / 1000)
            if crash:
                self.child(ENGINE_RESTARTS, crash).inc()

    def _apply_call(self, hook: str, outcome: str, seconds: float, mode: str = "live", origin: str = "api") -> None:
        if mode == "live" and origin == "api":   # the execute API's own series, as before the seam
            self.child(EXECUTE_REQUESTS, hook, outcome).inc()
            self.child(EXECUTE_SECONDS, hook, outcome).observe(seconds)
        self.child(CHAIN_RUNS, hook, mode, origin, outcome).inc()
        self.child(CHAIN_RUN_SECONDS, hook, mode, origin).observe(seconds)

    def _start(self) -> None:
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="hub-metrics", daemon=True)
                self.thread.start()
                atexit.register(self.apply)

    def _loop(self) -> None:
        stop = threading.Event()
        while not stop.wait(self.interval):
            self.apply()


deferred = _Deferred()


def observe_handlers(hook: str, trace) -> None:
    """One chain's handlers: run time by plugin, status counts, engines they cost."""
    deferred.add(("chain", hook, [(t.plugin, t.status, t.duration_ms, t.crash, t.reason) for t in trace]))


def observe_chain(run: ChainRun) -> None:
    """An after-chain observer: the run's handlers into the handler metrics."""
    observe_handlers(run.spec.name, run.result.trace)


class _Counted:
    """An invocation probe: counts and times one chain run; a refused one is "rejected", one that failed
    otherwise (no engine, a bug) "failed"."""

    __slots__ = ("started",)

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def finish(self, invocation) -> None:
        self._add(invocation, invocation.result.outcome)

    def fail(self, invocation, exc: BaseException) -> None:
        self._add(invocation, "rejected" if isinstance(exc, HubError) else "failed")

    def headers(self) -> dict[str, str]:
        return {}

    def _add(self, invocation, outcome: str) -> None:
        deferred.add(("call", hook_label(invocation.hook), outcome, time.perf_counter() - self.started,
                      str(invocation.mode), invocation.origin))


def invocation_probe(invocation) -> _Counted:
    """Added by the app's ready(): every chain run, whoever asks for it, is counted."""
    return _Counted()


def task_queued(task: str, outcome: str) -> None:
    TASKS_QUEUED.labels(task.rsplit(".", 1)[-1], outcome).inc()


def admission_waited(seconds: float) -> None:
    deferred.add(("admission", seconds))


def admission_rested(seconds: float) -> None:
    deferred.add(("rest", seconds))


def admission_shed(shed: object) -> None:
    deferred.add(("shed",))


def quarantined() -> None:
    QUARANTINES.inc()


# -- Celery -------------------------------------------------------------------------------------------
def _task_name(sender) -> str:
    return getattr(sender, "name", None) or OTHER


def register() -> None:
    """Connects the Celery signals (called from the app's ready())."""
    from celery import signals

    signals.task_success.connect(_on_success, weak=False, dispatch_uid="hub-metrics-success")
    signals.task_failure.connect(_on_failure, weak=False, dispatch_uid="hub-metrics-failure")
    signals.task_retry.connect(_on_retry, weak=False, dispatch_uid="hub-metrics-retry")


def _on_success(sender: Any = None, **kwargs: Any) -> None:
    CELERY_TASKS.labels(_task_name(sender), "success").inc()


def _on_failure(sender: Any = None, **kwargs: Any) -> None:
    CELERY_TASKS.labels(_task_name(sender), "failure").inc()


def _on_retry(sender: Any = None, **kwargs: Any) -> None:
    CELERY_TASKS.labels(_task_name(sender), "retry").inc()


# -- the scrape -----------------------------------------------------------------------------------
class EngineCollector:
    """Asks each engine of the tier for its state at scrape time (engines run no Python metrics)."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("hub_engine_up", "1 when the engine answered this scrape", labels=["engine"])
        queued = GaugeMetricFamily("hub_engine_queued_chains", "Chains waiting in the engine's queue",
                                   labels=["engine"])
        compartments = GaugeMetricFamily("hub_engine_compartments", "Installations loaded in the engine's isolate",
                                         labels=["engine"])
        resident = GaugeMetricFamily("hub_engine_resident_bytes",
                                     "The engine process's resident memory (bounded by HUB_ENGINE_MEMORY_MB)",
                                     labels=["engine"])
        counters = {name: CounterMetricFamily(metric, text, labels=["engine"]) for name, metric, text in (
            ("replaced", "hub_engine_isolates_replaced", "Isolates closed and replaced by the engine process"),
            ("compartmentMisses", "hub_engine_compartment_misses",
             "Handlers whose compartment the isolate lacked when asked to run (the rest were hits)"),
            ("codeCacheMisses", "hub_engine_code_cache_misses",
             "Compartment misses the engine's code cache lacked too"),
            ("memoryCharged", "hub_engine_memory_charges",
             "Installations whose compartment the engine dropped for holding its memory, and charged"),
        )}
        tier = get_tier()
        for index, address in enumerate(tier.addresses):
            engine = ("lane-" if address in tier.lane and address not in tier.engines else "") + str(index)
            try:
                status = tier.ping(address)
            except Exception:
                up.add_metric([engine], 0)
                continue
            up.add_metric([engine], 1)
            queued.add_metric([engine], status.get("queued", 0))
            compartments.add_metric([engine], status.get("compartments", 0))
            resident.add_metric([engine], status.get("rssBytes", 0))
            for name, family in counters.items():
                family.add_metric([engine], status.get(name, 0))
        yield from (up, queued, compartments, resident, *counters.values())


class _ThisProcess:
    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def multiprocess_dir() -> str | None:
    return Env(os.environ).text("PROMETHEUS_MULTIPROC_DIR") or None


def scrape() -> bytes:
    """The text exposition: every process's metrics (multiprocess mode) or this one's, and the engines'."""
    deferred.apply()   # this process's own observations are current; other workers' lag at most a flush
    registry = CollectorRegistry()
    if multiprocess_dir():
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(EngineCollector())
    return generate_latest(registry)


def token_set() -> bool:
    return bool(settings.HUB_METRICS.token)


def may_scrape(authorization: str, remote_addr: str) -> tuple[bool, str]:
    """(allowed, why not): a bearer token when HUB_METRICS_TOKEN is set; without one, loopback callers
    of a development server only. Behind a reverse proxy on the same host every caller is loopback,
    and the scrape names every tenant's plugins: a production hub answers only the token."""
    token = settings.HUB_METRICS.token
    if not token and not settings.DEBUG:
        return False, ("with DJANGO_DEBUG=0, /metrics answers only a bearer token: set HUB_METRICS_TOKEN "
                       "(behind a reverse proxy on this host every caller would be loopback)")
    if token:
        scheme, _, given = authorization.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
            return True, ""
        return False, "send Authorization: Bearer <HUB_METRICS_TOKEN>"
    try:
        if ipaddress.ip_address(remote_addr).is_loopback:
            return True, ""
    except ValueError:
        pass
    return False, "metrics answer only loopback callers unless HUB_METRICS_TOKEN is set"

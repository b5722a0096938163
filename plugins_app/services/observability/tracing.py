"""Traces of chain runs (OpenTelemetry, OTLP) joined to the caller's W3C traceparent, and Server-Timing."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from plugins_app.runtime.environment import Env
from plugins_app.runtime.protocol import FAILED_STATUSES

_provider = None
_tracer = None
_lock = threading.Lock()


def enabled() -> bool:
    """Tracing runs only when an OTLP endpoint is configured; otherwise nothing is imported or made."""
    env = Env(os.environ)
    return bool(env.text("OTEL_EXPORTER_OTLP_ENDPOINT") or env.text("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def _get_tracer() -> Any:
    global _provider, _tracer
    with _lock:
        if _tracer is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            # The exporter reads OTEL_EXPORTER_OTLP_* itself (endpoint, headers, timeout).
            _provider = TracerProvider(resource=Resource.create(
                {"service.name": Env(os.environ).text("OTEL_SERVICE_NAME", "middleware-hub")}))
            _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            _tracer = _provider.get_tracer("middleware_hub.execute")
        return _tracer


def force_flush(timeout_ms: int = 10_000) -> bool:
    return _provider.force_flush(timeout_ms) if _provider is not None else True


class _Untraced:
    """The probe of a run while tracing is off: nothing made, nothing sent."""

    def finish(self, invocation) -> None:
        pass

    def fail(self, invocation, exc: BaseException) -> None:
        pass

    def headers(self) -> dict[str, str]:
        return {}


UNTRACED = _Untraced()


class _ChainSpan:
    """The span of one chain run (an invocation probe): opened when the run is, ended at its finish."""

    def __init__(self, tracer, span, started_ns: int):
        self.tracer, self.span, self.started_ns = tracer, span, started_ns

    def finish(self, invocation) -> None:
        """One child span per handler, laid end to end from the chain's start (handlers run in turn)."""
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        result = invocation.result
        self.span.set_attribute("hub.outcome", result.outcome)
        parent = trace.set_span_in_context(self.span)
        at = self.started_ns
        for index, entry in enumerate(result.trace):
            end = at + int(entry.duration_ms * 1_000_000)
            child = self.tracer.start_span(f"handler {entry.plugin}", context=parent, start_time=at, attributes={
                "hub.plugin": entry.plugin, "hub.installation_id": entry.installation_id,
                "hub.status": entry.status, "hub.position": index, "hub.duration_ms": entry.duration_ms})
            if entry.status in FAILED_STATUSES:
                child.set_status(Status(StatusCode.ERROR, (entry.warning or entry.status)[:200]))
            child.end(end_time=end)
            at = end
        self.span.end()

    def fail(self, invocation, exc: BaseException) -> None:
        from opentelemetry.trace import StatusCode

        self.span.set_status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:200])
        self.span.end()

    def headers(self) -> dict[str, str]:
        ctx = self.span.get_span_context()
        # W3C Trace Context level 2: tells the caller which span is the hub's.
        return {"traceresponse": f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"}


def span_name(mode: str, hook: str) -> str:
    """`execute <hook>` for a live run (the platform's call, cron, a timer...), `<mode> <hook>` otherwise."""
    return f"{'execute' if mode == 'live' else mode} {hook}"


def invocation_probe(invocation):
    """An invocation probe (added by the app's ready()): the run's span, a child of the caller's
    `traceparent` when it is valid. Not ended on any thread in particular: the async execute path
    opens it in one thread and ends it in another, so it is never made the current span."""
    if not enabled():
        return UNTRACED
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    tracer = _get_tracer()
    traceparent = invocation.traceparent
    parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent} if traceparent else {})
    started = time.time_ns()
    span = tracer.start_span(span_name(invocation.mode, invocation.hook), context=parent, start_time=started,
                             attributes={"hub.hook": invocation.hook,
                                         "hub.account_id": str(getattr(invocation.account, "pk", "")),
                                         "hub.mode": str(invocation.mode), "hub.origin": invocation.origin})
    return _ChainSpan(tracer, span, started)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def server_timing(chain_ms: float, trace) -> str:
    """`chain;dur=…` first, then one `h<position>` entry per handler naming its plugin and status."""
    parts = [f"chain;dur={chain_ms:.2f}"]
    for index, entry in enumerate(trace):
        label = f"{entry.plugin} {entry.status}"
        if not (label.isascii() and label.isprintable()) or '"' in label or "\\" in label:
            label = _quoted("".join(c if c.isprintable() and c.isascii() else "?" for c in label))[1:-1]
        parts.append(f'h{index};dur={entry.duration_ms:.2f};desc="{label}"')
    return ", ".join(parts)

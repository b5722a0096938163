"""host.kv: the installation's lasting keys (services/kv/), or a dry run's discarded overlay of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plugins_app.runtime.web.chain import HostError
from plugins_app.services.execution.host_bridge import HostCall, member
from plugins_app.services.kv import checks, store
from plugins_app.services.kv.checks import KvError
from plugins_app.services.kv.overlay import Overlay
from plugins_app.services.observability.metering import meter
from plugins_app.services.observability.metrics import KV_CALLS

READS = frozenset({"get", "list"})


def _arg(args: list, index: int) -> Any:
    return args[index] if len(args) > index else None


def _backend(call: HostCall) -> store.Namespace | tuple[store.Namespace, Overlay]:
    ns = store.Namespace(call.account.pk, int(call.handler.installation_id))
    if call.scratch is None:
        return ns
    return ns, call.scratch.setdefault("kv", Overlay())


def _run(call: HostCall, name: str, args: list, live: Callable[..., Any], dry: Callable[..., Any],
         *checked: Any) -> Any:
    """Calls the store (or, in a run that records nothing, the overlay), counting the call, and turns a
    refusal into the rejected promise the plugin sees."""
    backend = _backend(call)
    try:
        if isinstance(backend, tuple):
            answer = dry(backend[1], backend[0], *checked)
            if name not in READS:
                call.would_call.append({"installationId": call.handler.installation_id, "plugin": call.handler.plugin,
                                        "member": f"host.kv.{name}", "args": args, "standIn": answer})
            KV_CALLS.labels(name, "dry").inc()
            return answer
        answer = live(backend, *checked)
    except KvError as exc:
        KV_CALLS.labels(name, "rejected").inc()
        raise HostError(f"host.kv.{name}: {exc}") from None
    refused = isinstance(answer, dict) and answer.get("ok") is False
    KV_CALLS.labels(name, "refused" if refused else "ok").inc()
    if call.record:
        meter.add_kv(call.account.pk, call.handler.plugin, call.spec.name,
                     reads=int(name in READS), writes=int(name not in READS))
    return answer


def _checked(name: str, check: Callable[[], tuple]) -> tuple:
    try:
        return check()
    except KvError as exc:
        KV_CALLS.labels(name, "rejected").inc()
        raise HostError(f"host.kv.{name}: {exc}") from None


@member("kv.get")
def get(call: HostCall, args: list) -> Any:
    key = _checked("get", lambda: (checks.key(_arg(args, 0)),))
    return _run(call, "get", args, store.get, Overlay.get, *key)


@member("kv.put")
def put(call: HostCall, args: list) -> None:
    def check() -> tuple:
        if len(args) < 2:
            raise KvError("give a key and a value")
        options = checks.options(_arg(args, 2), ("ttlSeconds",))
        return checks.key(args[0]), checks.value(args[1]), checks.ttl(options.get("ttlSeconds"))
    _run(call, "put", args, store.put, Overlay.put, *_checked("put", check))


@member("kv.delete")
def delete(call: HostCall, args: list) -> dict:
    key = _checked("delete", lambda: (checks.key(_arg(args, 0)),))
    return _run(call, "delete", args, lambda ns, k: {"deleted": store.delete(ns, k)},
                lambda overlay, ns, k: {"deleted": overlay.delete(ns, k)}, *key)


@member("kv.list")
def list_keys(call: HostCall, args: list) -> dict:
    def check() -> tuple:
        options = checks.options(_arg(args, 0), ("prefix", "limit", "cursor"))
        return (checks.optional_string(options.get("prefix"), "prefix"), checks.limit(options.get("limit")),
                checks.optional_string(options.get("cursor"), "cursor"))
    return _run(call, "list", args, store.list_keys, Overlay.list_keys, *_checked("list", check))


@member("kv.incr")
def incr(call: HostCall, args: list) -> int | dict:
    def check() -> tuple:
        by = _arg(args, 1)
        options = checks.options(_arg(args, 2), ("ttlSeconds", "max"))
        maximum = options.get("max")
        return (checks.key(_arg(args, 0)), 1 if by is None else checks.step(by, "by"),
                checks.ttl(options.get("ttlSeconds")), None if maximum is None else checks.step(maximum, "max"))
    return _run(call, "incr", args, store.incr, Overlay.incr, *_checked("incr", check))

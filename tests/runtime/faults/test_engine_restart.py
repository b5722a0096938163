"""An engine that dies costs only the chain it was running (issue 29, items 2 and 3): a link to an engine
that exited is found stale before use and replaced, a call that waited in line on an engine that died is
sent again to its replacement, and a tier whose supervisor is gone answers EngineUnavailable (nothing
ran), never a ConnectionRefusedError."""

import os
import signal
import socket
import threading
import time

import pytest

from plugins_app.runtime import wire
from plugins_app.runtime.engine.supervisor import Supervisor
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import run_chain
from plugins_app.runtime.web.tier import EngineDown, EngineLink, EngineUnavailable, tier_for

from ..conftest import PROMPT_CONTEXT

VETO = "globalThis.middleware.userMessageInbound = async (c, tools) => tools.cancel('kept');"
INBOUND = {"sessionId": "1", "channelId": None, "text": "rm -rf /", "mediaIds": []}


def wait_until_gone(pid):
    """Until the killed engine is reaped (its supervisor then starts another on the same socket)."""
    deadline = time.monotonic() + 15
    while os.path.exists(f"/proc/{pid}"):
        assert time.monotonic() < deadline, "the killed engine was never reaped"
        time.sleep(0.05)


def test_a_call_after_its_engine_died_runs_on_the_replacement(one_engine, make_handler):
    supervisor, tier = one_engine
    veto = make_handler(VETO)
    first = run_chain(tier, "acct", HOOKS["userMessageInbound"], [veto], INBOUND)
    assert first.cancellation is not None   # this thread now has a link to the engine
    old_pid = tier.ping(tier.engines[0])["pid"]
    os.kill(old_pid, signal.SIGKILL)
    wait_until_gone(old_pid)
    again = run_chain(tier, "acct", HOOKS["userMessageInbound"], [veto], INBOUND)
    # The veto plugin ran on the new engine: the message is stopped, not let through fail-open.
    assert again.cancellation is not None and again.cancellation.reason == "kept"
    assert [t.status for t in again.trace] == ["cancelled"]
    assert tier.ping(tier.engines[0])["pid"] != old_pid


def test_with_no_supervisor_left_a_call_is_engine_unavailable_and_nothing_runs(tmp_path, make_handler):
    supervisor = Supervisor(tmp_path / "engines", engines=1, lane=0).start()
    tier = tier_for(supervisor.describe())
    supervisor.stop()   # its sockets and engines are gone; nobody listens any more
    with pytest.raises(EngineUnavailable):
        tier.ping(tier.engines[0])
    # Not a fail-open answer (the plugin never ran): the API turns this into 503 with Retry-After.
    with pytest.raises(EngineUnavailable):
        run_chain(tier, "acct", HOOKS["systemPrompt"], [make_handler(
            "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '!';")], PROMPT_CONTEXT)
    tier.shutdown()


SLOW_VETO = ("globalThis.middleware.userMessageInbound = async (c, tools) => {"
             " const t = Date.now(); while (Date.now() - t < 150) {} return tools.cancel('kept'); };")


def test_calls_waiting_in_line_on_an_engine_that_dies_run_on_its_replacement(one_engine, make_handler):
    # Only the chain running when the engine died may fail open; the ones queued behind it had not
    # started, and are sent again on a fresh connection (21 of 48 vetoes were let through before).
    supervisor, tier = one_engine
    veto = make_handler(SLOW_VETO)
    run_chain(tier, "acct", HOOKS["userMessageInbound"], [veto], INBOUND)   # warm: compiled and shipped
    results, errors = [], []

    def call():
        try:
            results.append(run_chain(tier, "acct", HOOKS["userMessageInbound"], [veto], INBOUND))
        except Exception as exc:   # noqa: BLE001 - recorded, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(6)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while (status := tier.ping(tier.engines[0]))["queued"] < 3:
        assert time.monotonic() < deadline, f"the calls never queued: {status}"
        time.sleep(0.01)
    os.kill(status["pid"], signal.SIGKILL)
    for thread in threads:
        thread.join(60)
    assert errors == [] and len(results) == 6
    failed_open = [r for r in results if r.cancellation is None]
    assert all(r.trace[0].crash == "crashed" for r in failed_open), [r.trace[0].warning for r in failed_open]
    # At most the one chain the engine was running; every call that waited in line was vetoed.
    assert len(failed_open) <= 1, [r.trace[0].warning for r in failed_open]
    assert sum(r.cancellation is not None for r in results) >= 5


def _kill_the_private_engine(started: list, slow: threading.Event) -> None:
    """Kills the private engine started last, once it has reported the spinning handler holding its
    isolate (the engine's `slow` notice)."""
    assert slow.wait(30), "the private engine never reported the spinning handler"
    os.kill(started[-1].proc.pid, signal.SIGKILL)


def test_private_engines_that_die_give_their_places_back(one_engine, make_handler, monkeypatch):
    # A chain nested inside a host call runs on a private engine; one that dies must not keep its
    # place, or after MAX_PRIVATE_ENGINES deaths every nested chain fails with PoolExhausted.
    from plugins_app.runtime.web import tier as tier_module

    started = []

    class Recorded(tier_module.PrivateEngine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(tier_module, "PrivateEngine", Recorded)
    _, tier = one_engine
    spin = make_handler("globalThis.middleware.systemPrompt = async (c) => {"
                        " const t = Date.now(); while (Date.now() - t < 3000) {} return c.systemPrompt; };")
    for _ in range(tier_module.MAX_PRIVATE_ENGINES + 1):
        slow = threading.Event()
        killer = threading.Thread(target=_kill_the_private_engine, args=(started, slow))
        killer.start()
        tier._local.depth = 1   # as inside a host call: the chain goes to a private engine
        try:
            result = run_chain(tier, "nested", HOOKS["systemPrompt"], [spin], PROMPT_CONTEXT, cpu_ms=10_000,
                               on_slow=lambda handler, slow=slow: slow.set())
        finally:
            tier._local.depth = 0
        killer.join(15)
        assert [t.crash for t in result.trace] == ["crashed"]   # the death was seen, and the chain failed open
    assert tier.private_count == 0


@pytest.mark.parametrize(("engine_reads", "says", "started"), [
    (False, None, False),        # died with the request unread: the connection is reset, nothing ran
    (True, None, True),          # read it (a chain started on arrival says nothing): it may have run
    (True, "queued", False),     # read it and put it in line: nothing ran
    (True, "started", True),     # queued, then started by the work loop
])
def test_what_a_dead_engine_had_done_with_a_request(engine_reads, says, started):
    ours, theirs = socket.socketpair()
    link = EngineLink(wire.Frames(ours.detach()))
    engine = wire.Frames(theirs.detach())

    def die():
        if engine_reads:
            engine.recv_bytes()
        for op in {"queued": ["queued"], "started": ["queued", "started"]}.get(says, []):
            engine.send_bytes(wire.dumps({"op": op, "id": 1}))
        engine.close()   # as the kernel closes a killed engine's sockets

    threading.Thread(target=die).start()
    with pytest.raises(EngineDown) as down:
        link.request({"op": "run"}, silence_limit=5)
    assert down.value.started is started

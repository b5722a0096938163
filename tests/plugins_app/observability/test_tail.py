"""The live tail's parts without a server: the file and Redis channels, the per-account budget, a run's
events and the stream's filters (tests/hub_cli/test_tail.py drives the whole thing through gunicorn)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from plugins_app.errors import InvalidInput
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import Cancellation, ChainResult, HandlerTrace
from plugins_app.services.execution.observers import ChainRun
from plugins_app.services.observability import tail, tail_channel, tail_slots
from tests.integration.celery_services import wait_until
from tests.plugins_app.serving import ROOT


def test_a_file_ring_carries_lines_between_processes_and_follows_a_rotation(tmp_path, monkeypatch):
    monkeypatch.setattr(tail_channel, "ROTATE_BYTES", 200)
    streamer, worker = tail_channel.FileChannel(tmp_path), tail_channel.FileChannel(tmp_path)   # two processes
    assert not worker.listening(7)
    subscription = streamer.subscribe(7)
    monkeypatch.setattr(tail_channel, "CHECK_CACHE_SECONDS", 0.0)
    assert worker.listening(7) and not worker.listening(8)
    sent = [{"n": i, "text": "x" * 40} for i in range(30)]   # several rotations' worth
    got: list[dict] = []
    for i in range(0, 30, 3):
        worker.publish(7, sent[i:i + 3])
        got += subscription.read(0)
    got += subscription.read(0.2)
    assert got == sent
    subscription.close()
    assert not worker.listening(7)


def test_a_redis_channel_carries_lines_between_processes(redis_url, monkeypatch):
    monkeypatch.setattr(tail_channel, "CHECK_CACHE_SECONDS", 0.2)
    streamer, worker = tail_channel.RedisChannel(redis_url), tail_channel.RedisChannel(redis_url)
    assert worker.listening(7)   # not known yet: publishing finds out, off the caller's thread
    worker.publish(7, [{"n": 0}])
    wait_until(worker.sender.idle, 10, "the publisher")
    assert not worker.listening(7)   # PUBLISH said nobody listened: remembered for CHECK_CACHE_SECONDS
    subscription = streamer.subscribe(7)
    wait_until(lambda: worker.listening(7), 10, "the remembered answer to go stale")
    worker.publish(7, [{"n": 1}, {"n": 2}])
    worker.publish(8, [{"n": "another account"}])
    got = subscription.read(5)
    assert got == [{"n": 1}, {"n": 2}]
    subscription.close()


def test_the_budget_lets_200_a_second_through_and_counts_the_rest(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(tail.time, "monotonic", lambda: clock[0])
    budget = tail._Budget()
    assert budget.take(1, 250) == (200, 0)
    assert budget.take(1, 5) == (0, 0)          # no tokens: 55 dropped so far
    assert budget.take(2, 10) == (10, 0)        # another account has its own budget
    clock[0] += 0.5
    assert budget.take(1, 10) == (10, 55)       # half a second refills 100: the drops are reported
    assert budget.take(1, 10) == (10, 0)


def _run(account) -> ChainRun:
    spec = HOOKS["userMessageInbound"]
    trace = [HandlerTrace("11", "logger", "ran", True, 1.5, logs=[{"level": "info", "message": "hi", "at": 0}]),
             HandlerTrace("12", "broken", "error", False, 0.3, warning="TypeError: x is undefined (line 3)"),
             HandlerTrace("13", "gate", "cancelled", False, 0.2)]
    result = ChainResult(spec.name, "cancelled", {}, None, Cancellation("13", "gate", "no"), trace)
    return ChainRun(account, spec, {}, result, 0, "turn-1", {"11": 4, "13": 2})


class _Account:
    pk = 42


def test_a_run_becomes_run_log_warning_and_cancel_events_while_tailed(tmp_path, settings, monkeypatch):
    settings.HUB_TAIL = replace(settings.HUB_TAIL, channel="file", directory=str(tmp_path))
    tail.reset_channel()
    monkeypatch.setattr(tail_channel, "CHECK_CACHE_SECONDS", 0.0)
    tail.observe_chain(_run(_Account()))   # nobody listens: nothing is written
    assert not (tmp_path / "42.jsonl").exists() or (tmp_path / "42.jsonl").read_text() == ""
    subscription = tail.get_channel().subscribe(42)
    try:
        tail.observe_chain(_run(_Account()))
        events = subscription.read(1)
    finally:
        subscription.close()
        tail.reset_channel()
    assert [(e["type"], e["plugin"]) for e in events] == [
        ("log", "logger"), ("run", "logger"), ("run", "broken"), ("warning", "broken"), ("run", "gate"),
        ("cancel", "gate")]
    assert events[1]["version"] == 4 and events[0]["message"] == "hi" and events[5]["reason"] == "no"
    assert events[3]["message"].startswith("TypeError")


def test_filters_are_checked_and_applied():
    with pytest.raises(InvalidInput, match="not a status"):
        tail.Filters.parse({"status": "ran,exploded"})
    with pytest.raises(InvalidInput, match="unknown hook"):
        tail.Filters.parse({"hook": "nope"})
    only = tail.Filters.parse({"status": "error,cancelled", "plugin": "gate"})
    assert only.allows({"type": "cancel", "plugin": "gate", "status": "cancelled"})
    assert not only.allows({"type": "run", "plugin": "gate", "status": "ran"})
    assert not only.allows({"type": "cancel", "plugin": "other", "status": "cancelled"})
    assert only.allows({"type": "dropped", "count": 3})


def test_streams_are_shared_out_per_account_in_a_process(tmp_path, settings, monkeypatch):
    settings.HUB_TAIL = replace(settings.HUB_TAIL, channel="file", directory=str(tmp_path), max_seconds=1)
    tail.reset_channel()
    monkeypatch.setattr(tail_channel, "CHECK_CACHE_SECONDS", 0.0)
    share = tail.MAX_STREAMS_PER_ACCOUNT
    assert share == tail.MAX_STREAMS_PER_PROCESS // 2
    opened = [tail.open_stream(1, tail.Filters()) for _ in range(share)]
    try:
        with pytest.raises(tail.TooManyRequests, match=f"already holds {share} live tails, its share"):
            tail.open_stream(1, tail.Filters())
        # A second account may take what is left but the last free one, which stays for others.
        while True:
            try:
                opened.append(tail.open_stream(2, tail.Filters()))
            except tail.TooManyRequests as exc:
                assert "stay for accounts that hold none" in str(exc)
                break
        assert sum(tail._open.values()) == tail.MAX_STREAMS_PER_PROCESS - 1
        opened.append(tail.open_stream(3, tail.Filters()))   # a third account still gets one
        with pytest.raises(tail.TooManyRequests, match="every live tail this server holds is taken"):
            tail.open_stream(4, tail.Filters())
        events = iter(opened[0])
        assert next(events)["type"] == "ready"
        assert list(events) == [None]   # max_seconds later the stream ends (a keepalive on the way)
        opened[1].close()   # closed without being read (a client gone before the first byte): given back too
        assert tail.machine_slots().held() == tail.MAX_STREAMS_PER_PROCESS - 2
        opened.append(tail.open_stream(4, tail.Filters()))
    finally:
        for stream in opened:
            stream.close()
        tail.reset_channel()
    assert tail._open == {} or set(tail._open.values()) == {0}
    assert tail.machine_slots().held() == 0


HOLDER = """
import sys
from plugins_app.services.observability.tail_slots import MachineSlots
slots = MachineSlots(sys.argv[1], int(sys.argv[2]))
held = [slots.take(int(sys.argv[3])) for _ in range(int(sys.argv[4]))]
print(len(held), flush=True)
sys.stdin.read()   # holds them until the test closes its stdin
"""


def test_the_machines_slots_and_each_accounts_share_hold_across_processes(tmp_path):
    path, capacity = tmp_path / "slots.lock", 16
    slots = tail_slots.MachineSlots(path, capacity)
    share = slots.share
    assert (share.per_account, share.reserve) == (8, 2)
    other = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(capacity), "1", "5"], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    held = []
    try:
        assert other.stdout.readline().strip() == "5"   # account 1 holds 5 slots in the other process
        assert slots.held() == 5 and slots.held(1) == 5
        held += [slots.take(1) for _ in range(3)]   # ...and 3 here: its share of the machine
        with pytest.raises(tail_slots.Refused, match="its share"):
            slots.take(1)
        held += [slots.take(2) for _ in range(6)]   # account 2 up to the reserve
        with pytest.raises(tail_slots.Refused, match="stay for accounts that hold none"):
            slots.take(2)
        held += [slots.take(3), slots.take(4)]      # accounts holding none take the last two
        assert slots.held() == capacity
        with pytest.raises(tail_slots.Refused, match="every live tail"):
            slots.take(5)
    finally:
        other.stdin.close()
        other.wait(30)
    assert slots.held() == capacity - 5   # the kernel gave the other process's slots back as it ended
    held.append(slots.take(5))
    for slot in held:
        slot.close()
    assert slots.held() == 0


def test_a_stale_marker_stops_counting_and_is_swept(tmp_path, monkeypatch):
    monkeypatch.setattr(tail_channel, "CHECK_CACHE_SECONDS", 0.0)
    channel = tail_channel.FileChannel(tmp_path)
    left = tmp_path / "5.listen.123.1.1"
    left.touch()
    assert channel.listening(5)
    import os
    old = left.stat().st_mtime - 10 * tail_channel.LISTEN_FRESH_SECONDS
    os.utime(left, (old, old))
    assert not channel.listening(5)
    channel.subscribe(5).close()
    assert not left.exists()


def test_past_the_rate_events_are_dropped_and_the_stream_is_told_how_many(tmp_path, settings, monkeypatch):
    settings.HUB_TAIL = replace(settings.HUB_TAIL, channel="file", directory=str(tmp_path))
    tail.reset_channel()
    monkeypatch.setattr(tail_channel, "CHECK_CACHE_SECONDS", 0.0)
    monkeypatch.setattr(tail, "EVENTS_PER_SECOND", 4)
    monkeypatch.setattr(tail, "_budget", tail._Budget())
    clock = [500.0]
    monkeypatch.setattr(tail.time, "monotonic", lambda: clock[0])
    subscription = tail.get_channel().subscribe(42)
    try:
        tail.observe_chain(_run(_Account()))   # 6 events: 4 through, 2 dropped
        tail.observe_chain(_run(_Account()))   # no tokens left: all 6 dropped
        clock[0] += 1.0
        tail.observe_chain(_run(_Account()))   # refilled: the count first, then 4 events
        events = subscription.read(0)
    finally:
        subscription.close()
        tail.reset_channel()
    # A handler's logs come before its run's event: they were written while it ran.
    assert [e["type"] for e in events] == ["log", "run", "run", "warning", "dropped", "log", "run", "run", "warning"]
    assert events[4]["count"] == 8


def test_without_a_usable_slot_file_the_process_bounds_still_hold_and_it_says_so_once(settings, caplog,
                                                                                       monkeypatch, tmp_path):
    # The Redis channel needs no folder; one that can't be created costs the machine-wide count, not the tail.
    settings.HUB_TAIL = replace(settings.HUB_TAIL, channel="file", directory="/proc/hub-tail-unusable")
    monkeypatch.setattr(tail, "get_channel", lambda: tail_channel.FileChannel(tmp_path))
    monkeypatch.setattr(tail, "_warned", False)
    opened = [tail.open_stream(1, tail.Filters()) for _ in range(tail.MAX_STREAMS_PER_ACCOUNT)]
    try:
        with pytest.raises(tail.TooManyRequests, match="its share"):
            tail.open_stream(1, tail.Filters())
        opened.append(tail.open_stream(2, tail.Filters()))
    finally:
        for stream in opened:
            stream.close()
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "can't be used" in caplog.records[0].message

"""Each part of a machine's hub killed under a small load (issue 29): no answer is HTML or a 500, a veto
is let through only by a chain that was running when its engine died, the hub recovers within
RECOVERY_BOUND_SECONDS, and no row is lost (cancel rows equal cancelled answers; every shadow run the
answers queued is run). `make chaos` runs these and prints each scenario's figures."""

from __future__ import annotations

import os
import signal
import statistics
import time
from pathlib import Path

import pytest

from tests.plugins_app.scheduling.disks import fill, mount_tmpfs, unmount
from tests.plugins_app.scheduling.test_outbox import JOURNAL_FILES

from .cluster import RECOVERY_BOUND_SECONDS, Hub, Load, figures, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]
# Tasks a killed worker (concurrency 1) costs: the one it ran (acknowledged as it started) and the four it
# held reserved (Redis gives those back after its visibility timeout, an hour by default).
PREFETCHED = 1 + 4
STEADY = 30      # answers before a fault, and after it once healed
SPOOL_DISK = "4m"   # the task spool's own file system, so that a scenario can fill it


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("faults")
    spool = workdir / "var" / "task-spool"   # $HUB_VAR_DIR/task-spool of every process of the hub
    cannot_mount = mount_tmpfs(spool, SPOOL_DISK)
    hub = Hub(workdir)
    hub.answered = 0   # calls answered 200 so far: each queued one shadow run
    hub.spool, hub.spool_disk_missing = spool, cannot_mount
    yield hub
    hub.stop()
    if cannot_mount is None:
        unmount(spool)


def _settle(hub: Hub, load: Load) -> dict:
    """After a scenario's load: the rows its answers should have written, and those that were."""
    ok = [a for a in load.answers if a.status == 200]
    hub.answered += len(ok)
    return {"cancelled": sum(a.outcome == "cancelled" for a in ok)}


def _assert_clean(row: dict, answers) -> None:
    bad = [(a.status, a.json) for a in answers if a.status not in (200, 503) or not a.json]
    assert bad == [], f"HTML, 500 or no answer: {bad[:10]}"
    assert all(a.retry_after for a in answers if a.status == 503), "a 503 without Retry-After"
    assert row["recovery s"] is not None and row["recovery s"] <= RECOVERY_BOUND_SECONDS, row


def test_both_engines_killed_cost_only_the_chains_they_were_running(hub):
    rows_before = hub.cancel_rows()
    with Load(hub) as load:
        load.wait_for_answers(STEADY, 0)
        engines = hub.engine_pids()
        assert len(engines) == 2
        fault = time.monotonic()
        for pid in engines:
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: len(set(hub.engine_pids()) - set(engines)) == 2, 30, "both engines to be replaced")
        load.wait_for_vetoes(STEADY, time.monotonic())
    settled = _settle(hub, load)
    rows = hub.cancel_rows() - rows_before
    row = figures("both engines killed", load.answers, fault, **{"rows lost": settled["cancelled"] - rows})
    _assert_clean(row, load.answers)
    assert row["503"] == 0   # the supervisor listened throughout: every call waited for the new engines
    let_through = [a for a in load.answers if a.status == 200 and a.outcome != "cancelled"]
    # One chain runs at a time on an engine: at most one per killed engine may fail open; every call
    # waiting in an engine's line, or not read yet, was sent again and vetoed (21 of 48 let through before).
    assert len(let_through) <= len(engines) and all(a.crashed for a in let_through), let_through
    assert rows == settled["cancelled"]


def test_a_killed_supervisor_is_restarted_and_meanwhile_execute_answers_503(hub):
    rows_before = hub.cancel_rows()
    with Load(hub) as load:
        load.wait_for_answers(STEADY, 0)
        supervisor = hub.supervisor_pid()
        engines = hub.engine_pids()
        fault = time.monotonic()
        os.kill(supervisor, signal.SIGKILL)
        wait_until(lambda: (lambda found: found and found[0] != supervisor)(
            _try(hub.supervisor_pid)), 30, "gunicorn's master to start the supervisor again")
        load.wait_for_vetoes(STEADY, time.monotonic())   # once it listens: it starts as a process first
    settled = _settle(hub, load)
    rows = hub.cancel_rows() - rows_before
    row = figures("supervisor killed", load.answers, fault, **{"rows lost": settled["cancelled"] - rows})
    _assert_clean(row, load.answers)   # 17,932 HTML 500s in 30 s before
    let_through = [a for a in load.answers if a.status == 200 and a.outcome != "cancelled"]
    assert len(let_through) <= len(engines) and all(a.crashed for a in let_through), let_through
    assert rows == settled["cancelled"]


def _all_ran(hub: Hub, since: int, queued: int, on_exit=None) -> int:
    """Shadow runs not run (yet): waits for all of them a while, then for all but those the worker
    held reserved when it or Redis died (Redis gives those back after its visibility timeout, an
    hour by default: late, not lost). `on_exit` is called at each look (a service manager's restart)."""
    def done() -> bool:
        if on_exit is not None:
            on_exit()
        return hub.shadow_calls() - since >= queued

    try:
        wait_until(done, 30, "every shadow run")
    except AssertionError:
        ran = hub.shadow_calls() - since
        assert ran >= queued - PREFETCHED, f"{queued - ran} of {queued} shadow runs never ran"
    return queued - (hub.shadow_calls() - since)


def _try(read):
    try:
        return [read()]
    except IndexError:   # not running right now
        return []


def test_a_broker_outage_neither_slows_execute_nor_loses_a_shadow_run(hub):
    wait_until(lambda: hub.shadow_calls() >= hub.answered - PREFETCHED, 120, "the shadow backlog to drain")
    shadow_before, answered_before, lines_before = hub.shadow_calls(), hub.answered, hub.log_lines()
    lost_before = hub.metric("hub_tasks_queued_total", outcome="lost")
    with Load(hub) as load:
        load.wait_for_answers(STEADY, 0)
        fault = time.monotonic()
        hub.redis.kill()
        load.wait_for_answers(STEADY, time.monotonic())   # answered while the broker is away
        back = time.monotonic()
        hub.redis.start()
        load.wait_for_answers(STEADY, time.monotonic())
    # Celery's worker sometimes exits when its broker connection is lost with messages reserved
    # (kombu: AttributeError on 'hostname' while restoring them): production runs it under a service
    # manager that starts it again, as this does; the figures say when it had to.
    # It can also exit a little later, while it restores them once Redis is back: a service manager
    # restarts it whenever it exits, so the wait below keeps doing so (seen once in a full run, where
    # 88 of 117 shadow runs waited for a worker that had exited after the first look).
    restarts = [hub.celery.revive("worker")]
    _settle(hub, load)
    lost = _all_ran(hub, shadow_before, hub.answered - answered_before,
                    on_exit=lambda: restarts.append(hub.celery.revive("worker")))
    restarted = any(restarts)
    before = [a.seconds for a in load.answers if a.at < fault]
    during = [a.seconds for a in load.answers if fault <= a.at < back]
    row = figures("redis killed 3 s", load.answers, fault,
                  **{"p50 ms before": round(statistics.median(before) * 1000, 1),
                     "p50 ms during": round(statistics.median(during) * 1000, 1),
                     "spooled": hub.metric("hub_tasks_queued_total", outcome="spooled"), "shadow runs late": lost,
                     "worker restarted": "yes" if restarted else "no", "log lines": hub.log_lines() - lines_before})
    _assert_clean(row, load.answers)
    assert row["503"] == 0 and row["fail-open"] == 0
    assert hub.metric("hub_tasks_queued_total", outcome="lost") == lost_before
    assert row["spooled"] > 0   # the outage was seen, and what it refused was kept
    assert {path.name for path in Path(hub.spool).iterdir()} <= JOURNAL_FILES   # in one journal, not a file each


def test_a_full_spool_disk_loses_only_what_it_refused_counted_and_logged_once(hub):
    # Issue 40, item 7: with the spool's disk full, the file-per-batch spool left an empty .*.json.tmp
    # per failed write (1,546 in 40 s) and logged a traceback per lost task (2,327).
    if hub.spool_disk_missing:
        pytest.skip(f"the spool's disk is filled for real: {hub.spool_disk_missing}")
    wait_until(lambda: hub.shadow_calls() >= hub.answered - PREFETCHED, 120, "the shadow backlog to drain")
    shadow_before, answered_before, lines_before = hub.shadow_calls(), hub.answered, hub.log_lines()
    queued = {outcome: hub.metric("hub_tasks_queued_total", outcome=outcome) for outcome in ("lost", "spooled")}
    with Load(hub) as load:
        load.wait_for_answers(STEADY, 0)
        filler = fill(hub.spool)   # another writer took the disk
        fault = time.monotonic()
        hub.redis.kill()
        load.wait_for_answers(STEADY, time.monotonic())   # the broker refuses, and the disk too
        filler.unlink()   # room again, the broker still away: spooled
        load.wait_for_answers(STEADY, time.monotonic())
        hub.redis.start()
        load.wait_for_answers(STEADY, time.monotonic())
    restarts = [hub.celery.revive("worker")]
    _settle(hub, load)
    lost = hub.metric("hub_tasks_queued_total", outcome="lost") - queued["lost"]
    spooled = hub.metric("hub_tasks_queued_total", outcome="spooled") - queued["spooled"]
    # Every shadow run ran but those the full disk refused (counted lost), and those a killed worker held.
    late = _all_ran(hub, shadow_before, hub.answered - answered_before - int(lost),
                    on_exit=lambda: restarts.append(hub.celery.revive("worker")))
    with open(hub.served.log, "rb") as log:   # the outbox's lines, and any traceback's (indented) lines
        spool_lines = [line.decode(errors="replace") for line in list(log)[lines_before:]
                       if b"scheduling" in line or line.startswith((b"Traceback", b" "))]
    row = figures("spool disk full, redis killed", load.answers, fault,
                  **{"tasks lost": int(lost), "spooled": int(spooled), "shadow runs late": late,
                     "worker restarted": "yes" if any(restarts) else "no",
                     "log lines": hub.log_lines() - lines_before, "spool log lines": len(spool_lines)})
    _assert_clean(row, load.answers)
    assert row["503"] == 0 and row["fail-open"] == 0
    assert lost > 0 and spooled > 0   # the full disk refused some, counted; the freed one kept the rest
    # Once per interval per web worker, each with how many it stands for; never a traceback per task.
    assert len(spool_lines) <= 20 and not any(line.startswith("Traceback") for line in spool_lines), spool_lines
    assert {path.name for path in Path(hub.spool).iterdir()} <= JOURNAL_FILES   # nothing a failed write left


def test_a_killed_worker_and_beat_leave_execute_alone_and_the_backlog_runs_once_they_are_back(hub):
    shadow_before, answered_before = hub.shadow_calls(), hub.answered
    with Load(hub) as load:
        load.wait_for_answers(STEADY, 0)
        fault = time.monotonic()
        hub.celery.kill("worker")
        hub.celery.kill("beat")
        load.wait_for_answers(STEADY, time.monotonic())
        hub.celery.start("worker")
        hub.celery.start("beat")
        load.wait_for_answers(STEADY, time.monotonic())
    _settle(hub, load)
    lost = _all_ran(hub, shadow_before, hub.answered - answered_before)
    row = figures("worker and beat killed", load.answers, fault, **{"shadow runs late": lost})
    _assert_clean(row, load.answers)
    assert row["503"] == 0 and row["fail-open"] == 0


FREEZE_SECONDS = 8   # past the tail's Redis timeout (0.5 s) and Celery's (HUB_BROKER_TIMEOUT_SECONDS, 5 s)
SLOWEST_BOUND_SECONDS = 3   # issue 40: a frozen part costs no call more than this (a JSON 503 is an answer)


def test_a_frozen_redis_holds_no_execute_call(hub):
    # Issue 40, item 2: SIGSTOP Redis 20 s gave 25 answers in 20 s, each waiting out redis-py's timeout
    # in the live tail's "anyone listening?" check, asked on the request's path. (Shadow runs a killed
    # worker held in an earlier scenario come back only after Redis's visibility timeout: not awaited.)
    shadow_before, answered_before, lines_before = hub.shadow_calls(), hub.answered, hub.log_lines()
    lost_before = hub.metric("hub_tasks_queued_total", outcome="lost")   # the full-disk scenario's are counted
    with Load(hub) as load:
        load.wait_for_answers(STEADY, 0)
        fault = time.monotonic()
        os.kill(hub.redis.proc.pid, signal.SIGSTOP)
        try:
            load.wait_for_answers(STEADY, fault)
            time.sleep(max(0.0, FREEZE_SECONDS - (time.monotonic() - fault)))   # the freeze lasts this long
        finally:
            os.kill(hub.redis.proc.pid, signal.SIGCONT)
        thawed = time.monotonic()
        load.wait_for_answers(STEADY, thawed)
    restarts = [hub.celery.revive("worker")]
    _settle(hub, load)
    late = _all_ran(hub, shadow_before, hub.answered - answered_before,
                    on_exit=lambda: restarts.append(hub.celery.revive("worker")))
    during = [a for a in load.answers if fault <= a.at < thawed]
    row = figures(f"redis frozen {FREEZE_SECONDS} s", load.answers, fault,
                  **{"answers frozen": len(during), "log lines": hub.log_lines() - lines_before,
                     "shadow runs late": late, "worker restarted": "yes" if any(restarts) else "no"})
    _assert_clean(row, load.answers)
    assert row["503"] == 0 and row["fail-open"] == 0
    assert row["slowest s"] <= SLOWEST_BOUND_SECONDS, row   # no call waited on the frozen Redis
    assert hub.metric("hub_tasks_queued_total", outcome="lost") == lost_before

"""Two `celery beat` processes against one broker and database (issue 40, item 9): an operator starting a
second beat by mistake, or a deploy whose new beat starts before the old one stops. Each beat sends every
tick of a cron job; each tick still fires once (one run, one cronJobFiring), none is lost, and execute
calls meanwhile are answered as usual. `make chaos` prints the figures."""

from __future__ import annotations

import json
import time

import pytest

from .cluster import Hub, Load, figures, wait_until
from .test_faults import STEADY, _assert_clean

pytestmark = [pytest.mark.integration, pytest.mark.slow]
EVERY = 2            # seconds between a job's slots: "every few seconds", so a short run sees many
BOTH_SECONDS = 40    # how long both beats run side by side: 20 slots
# Every slot is cancelled by cronJobFiring, so no run stays active into the next slot (which would be
# recorded `skipped` rather than fired) and each fire leaves one cancel row: its hook ran once.
HOLD = "globalThis.middleware.cronJobFiring = async (c, t) => t.cancel('held: ' + c.name);"
SENT = "Sending due task cron job"   # beat's line for each message it sends


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("beats")
    hub = Hub(workdir, with_celery=False, env={"HUB_CRON_MIN_INTERVAL_SECONDS": "1"})
    hub.celery = hub.celery_processes(workdir)
    yield hub
    hub.stop()


def _runs(hub: Hub, job_id: int) -> dict:
    """The job's runs (when beat sent each slot, by its key; status; trigger) and how many times its
    cronJobFiring cancelled, read from the hub's own database."""
    script = ("import json; from plugins_app.models import CancelLog, CronRun; "
              f"runs = list(CronRun.objects.filter(job_id={job_id}).values_list('trigger_key', 'status', 'trigger')); "
              "print(json.dumps({'runs': runs, 'hook runs': CancelLog.objects.filter(hook='cronJobFiring').count()}))")
    return json.loads(hub.served.manage("shell", "-c", script).strip().splitlines()[-1])


def _sent_at(trigger_key: str) -> float:
    """When beat sent an interval slot (epoch seconds): its key ends with it."""
    return float(trigger_key.rsplit(":", 1)[1])


def _lines(path, since: int = 0) -> list[str]:
    return path.read_text(errors="replace").splitlines()[since:]


def test_two_beats_fire_each_slot_once(hub):
    hub.install("hold", HOLD)
    celery = hub.celery
    celery.start("worker")
    celery.start("beat")
    status, _, body = hub.served.request("POST", "/api/v1/cron-jobs", {
        "agentId": "42", "name": "digest", "prompt": "the on-call digest", "schedule": {"intervalSeconds": EVERY}},
        hub.headers)
    assert status == 201, body
    job = int(json.loads(body)["id"])
    # The worker's first slot starts its engine (seconds): the window opens once slots fire promptly.
    wait_until(lambda: len(_runs(hub, job)["runs"]) >= 2, 60, "the job's first slots",
               details=lambda: "\n".join(_lines(celery.log("worker"))[-40:]))
    marks = {name: len(_lines(celery.log(name))) for name in ("worker", "beat")}
    with Load(hub) as load:
        load.wait_for_answers(STEADY, 0)
        celery.start("beat", name="beat2")   # the second beat: its own phase, read from the database
        marks["beat2"] = 0
        fault, started = time.time(), time.monotonic()   # from here both beats send every slot
        time.sleep(max(0.0, BOTH_SECONDS - (time.monotonic() - started)))   # both beats run this long
        until = time.time()
        status, _, body = hub.served.request("PATCH", f"/api/v1/cron-jobs/{job}", {"enabled": False}, hub.headers)
        assert status == 200, body
    # Messages sent before the job was disabled may still be queued: wait until the runs stop changing.
    seen: list = []
    wait_until(lambda: seen.append(_runs(hub, job)) or (len(seen) > 3 and seen[-1] == seen[-4]), 60,
               "the queued slots to be read")
    found = seen[-1]
    times = sorted(_sent_at(key) for key, _, trigger in found["runs"] if trigger == "schedule")
    window = [t for t in times if fault <= t <= until]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if fault - EVERY <= a and b <= until + EVERY]
    doubled = sum(1 for gap in gaps if gap < EVERY / 2)                    # one tick fired twice
    lost = sum(round(gap / EVERY) - 1 for gap in gaps if gap > EVERY * 1.5)   # a tick nobody fired
    sends = {name: sum(SENT in line for line in _lines(celery.log(name), marks[name])) for name in ("beat", "beat2")}
    log_lines = sum(len(_lines(celery.log(name), marks[name])) for name in ("worker", "beat", "beat2"))
    row = figures("two beats", load.answers, started,
                  **{"slots": round((until - fault) / EVERY), "fires": len(window), "sent": sends["beat"] + sends["beat2"],
                     "duplicates": doubled + found["hook runs"] - len(found["runs"]), "lost": lost,
                     "log lines": log_lines})
    _assert_clean(row, load.answers)
    assert row["503"] == 0 and row["fail-open"] == 0
    # Both beats sent (nearly) every slot of the window: the claim, not one idle beat, kept each to one fire.
    assert min(sends.values()) >= row["slots"] - 2, (sends, row)
    assert all(status == "cancelled" for _, status, _ in found["runs"]), found["runs"]   # none skipped nor left firing
    assert found["hook runs"] == len(found["runs"]), found   # cronJobFiring ran once per run
    assert doubled == 0 and lost == 0, (gaps, row)
    assert abs(len(window) - row["slots"]) <= 1, (window, row)

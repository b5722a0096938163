"""The task spool on a full disk (issue 40, item 7): the file-per-batch spool left an empty `.*.json.tmp`
for every failed write (1,546 in 40 s) and logged a traceback per lost task (2,327). On a real small
file system (a tmpfs mounted for the test): what the disk takes is kept and sent, what it does not is
counted lost and logged once, nothing is left behind, and the spool works again once there is room."""

import logging

import pytest

from plugins_app.services.scheduling.outbox import Outbox
from tests.integration.celery_services import wait_until
from tests.plugins_app.scheduling.disks import fill, mount_tmpfs, unmount
from tests.plugins_app.scheduling.test_outbox import JOURNAL_FILES

LOGGER = "plugins_app.services.scheduling.outbox"
DISK = "1m"   # room for a few thousand tasks; RESERVE_BYTES (256 KiB) of it kept for sending them


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs of the test's own: filled for real, by the spool itself or by another writer."""
    point = tmp_path / "disk"
    cannot = mount_tmpfs(point, DISK)
    if cannot:
        pytest.skip(f"the full-disk tests mount a small tmpfs to fill, and {cannot}")
    yield point
    unmount(point)


class Broker:
    """The publish function: away (refusing) or back (keeping what it is sent)."""

    def __init__(self):
        self.away, self.sent = True, []

    def __call__(self, task, args):
        if self.away:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        self.sent.append(args[0])


def outbox_on(spool, broker):
    counts = {}
    outbox = Outbox(lambda: spool, broker, retry_seconds=0.2)
    outbox.on_count = lambda task, outcome: counts.__setitem__(outcome, counts.get(outcome, 0) + 1)
    return outbox, counts


def put_all(outbox, numbers):
    for n in numbers:
        outbox.put("t", [n, "x" * 40])
    assert outbox.wait_idle(60)


def outbox_lines(caplog):
    return [r for r in caplog.records if r.name == LOGGER]


def test_the_spool_filling_its_disk_keeps_what_fits_counts_the_rest_lost_and_still_sends(small_disk, caplog):
    spool = small_disk / "spool"
    broker = Broker()
    outbox, counts = outbox_on(spool, broker)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        put_all(outbox, range(20_000))
    spooled, lost = counts.get("spooled", 0), counts.get("lost", 0)
    assert spooled + lost == 20_000 and spooled > 1000 and lost > 1000, counts
    assert outbox.pending() == spooled   # every task the disk took is there
    assert {path.name for path in spool.iterdir()} <= JOURNAL_FILES   # one journal, no temporary file
    lines = outbox_lines(caplog)
    # The outage and the losses, once each (twice if the interval passed meanwhile).
    assert 2 <= len(lines) <= 4 and all(r.exc_info is None for r in lines), [r.getMessage() for r in lines]
    assert any(r.getMessage().startswith("lost ") and "disk is full" in r.getMessage() for r in lines)
    # The broker is back while the disk is still full: the room the spool keeps is enough to send it all.
    broker.away = False
    wait_until(lambda: len(broker.sent) >= spooled and outbox.pending() == 0, 30, "the spool to be sent")
    assert len(broker.sent) == len(set(broker.sent)) == spooled   # each task the disk kept, once
    assert counts["resent"] == spooled
    # Sent, its rows gave their pages back: a second outage is spooled again.
    broker.away = True
    put_all(outbox, range(20_000, 20_100))
    assert counts["spooled"] == spooled + 100 and counts["lost"] == lost
    assert outbox.pending() == 100


def test_a_disk_another_writer_filled_loses_only_what_it_refused_and_leaves_nothing_behind(small_disk, caplog):
    spool = small_disk / "spool"
    broker = Broker()
    outbox, counts = outbox_on(spool, broker)
    outbox._journal.reserve_bytes = 0   # another writer takes the bytes the spool keeps for itself too
    put_all(outbox, range(200))
    assert counts == {"spooled": 200}
    filler = fill(small_disk)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        put_all(outbox, range(200, 1200))
    refused = counts.get("lost", 0)
    # SQLite rolled each refused write back: the journal holds exactly what was counted spooled.
    assert refused > 0 and counts["spooled"] + refused == 1200, counts
    assert outbox.pending() == counts["spooled"]
    assert {path.name for path in small_disk.iterdir()} == {"spool", "filler"}
    assert {path.name for path in spool.iterdir()} <= JOURNAL_FILES   # no temporary file of a failed write
    lines = outbox_lines(caplog)
    assert 1 <= len(lines) <= 4 and all(r.exc_info is None for r in lines), [r.getMessage() for r in lines]
    assert sum(r.getMessage().startswith("lost ") for r in lines) == 1   # hundreds of tasks, one line
    # Room again: everything kept is sent, once, and new tasks are kept.
    filler.unlink()
    kept = counts["spooled"]
    broker.away = False
    wait_until(lambda: len(broker.sent) >= kept and outbox.pending() == 0, 30, "the spool to be sent")
    assert len(broker.sent) == len(set(broker.sent)) == kept
    broker.away = True
    put_all(outbox, range(1200, 1300))
    assert counts["spooled"] == kept + 100 and counts["lost"] == refused


"""The task outbox (issue 29, item 5; issue 40, item 7): tasks are published off the caller's path;
while the broker is away they are kept in one journal on disk, counted, and sent once it is back, by
whichever process of the machine gets to them first: none dropped, none sent twice by two senders."""

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
import redis

from plugins_app.services.scheduling.journal import FILE, Journal
from plugins_app.services.scheduling.outbox import Outbox
from tests.integration.celery_services import _pings, _require_redis_server, free_port, wait_until
from tests.plugins_app.serving import ROOT

pytestmark = pytest.mark.integration
JOURNAL_FILES = {FILE, f"{FILE}-wal", f"{FILE}-shm"}   # the journal and SQLite's own companions, nothing else


class StoppableRedis:
    """A redis-server on one port that can be stopped and started again (the broker's outage)."""

    def __init__(self, workdir):
        self.binary, self.port, self.workdir = _require_redis_server(), free_port(), workdir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", str(self.workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: _pings(self.url), 30, "redis-server to answer PING")

    def stop(self):
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def broker(tmp_path):
    server = StoppableRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def spool_process(mode, spool, broker):
    """Another process of the machine with its own outbox on `spool` (spool_process.py)."""
    return subprocess.Popen([sys.executable, "-m", "tests.plugins_app.scheduling.spool_process", mode, str(spool),
                             broker.url], cwd=ROOT)


def claimed_by(spool, pid):
    with contextlib.closing(sqlite3.connect(spool / FILE, timeout=5)) as db:
        return db.execute("SELECT COUNT(*) FROM tasks WHERE claimed_by = ?", (pid,)).fetchone()[0]


def test_tasks_refused_while_the_broker_is_away_are_spooled_counted_and_sent_later(broker, tmp_path):
    client = redis.Redis.from_url(broker.url, socket_timeout=1, socket_connect_timeout=1)
    callers = set()

    def publish(task, args):
        callers.add(threading.current_thread().name)
        client.rpush("tasks", f"{task}:{args[0]}")

    counts = {}
    spool = tmp_path / "spool"
    outbox = Outbox(lambda: spool, publish, retry_seconds=0.2)
    outbox.on_count = lambda task, outcome: counts.__setitem__(outcome, counts.get(outcome, 0) + 1)
    outbox.put("t", [0])
    assert outbox.wait_idle(10) and counts == {"sent": 1}
    broker.stop()
    for n in range(1, 201):
        outbox.put("t", [n])
        if n % 20 == 0:   # ten writes to the spool, not one: the file-per-batch spool made ten files of them
            assert outbox.wait_idle(20)
    assert outbox.wait_idle(20)
    assert counts.get("spooled") == 200 and outbox.pending() == 200   # kept on disk, not dropped
    assert {path.name for path in spool.iterdir()} <= JOURNAL_FILES   # in one journal
    broker.start()   # an empty broker on the same port: what it held before the outage is gone
    wait_until(lambda: client.llen("tasks") == 200, 30, "the spooled tasks to be sent")
    assert sorted(int(v.split(b":")[1]) for v in client.lrange("tasks", 0, -1)) == list(range(1, 201))
    wait_until(lambda: outbox.pending() == 0, 10, "the sent rows to leave the journal")
    assert counts == {"sent": 1, "spooled": 200, "resent": 200}
    assert callers == {"task-outbox"}   # never the caller's thread: a request never waits on the broker


def test_two_processes_sending_one_journal_send_each_task_once(broker, tmp_path):
    client = redis.Redis.from_url(broker.url, socket_timeout=5)
    spool = tmp_path / "spool"
    Journal(lambda: spool).append([("t", [n]) for n in range(1000)])
    # The first holds a claimed batch until the second has sent some: both send, at the same time.
    first = spool_process("wait", spool, broker)
    wait_until(lambda: client.llen("claimed"), 30, "the first process to claim a batch")
    second = spool_process("send", spool, broker)
    assert first.wait(60) == 0 and second.wait(60) == 0
    sent = [json.loads(v) for v in client.lrange("tasks", 0, -1)]
    assert sorted(n for _, n in sent) == list(range(1000))   # every task, and none twice
    by = {pid: sum(1 for p, _ in sent if p == pid) for pid in (first.pid, second.pid)}
    assert all(by.values()), by
    assert Journal(lambda: spool).count() == 0


def test_rows_claimed_by_a_process_that_was_killed_are_sent_by_another(broker, tmp_path):
    client = redis.Redis.from_url(broker.url, socket_timeout=5)
    spool = tmp_path / "spool"
    Journal(lambda: spool).append([("t", [n]) for n in range(300)])
    holder = spool_process("hold", spool, broker)
    try:
        wait_until(lambda: client.llen("claimed"), 30, "the process to claim a batch")
        assert claimed_by(spool, holder.pid) > 0
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    outbox = Outbox(lambda: spool, lambda task, args: client.rpush("tasks", json.dumps([0, args[0]])),
                    retry_seconds=0.1)
    outbox.start()
    wait_until(lambda: client.llen("tasks") == 300, 30, "the killed process's rows to be sent")
    assert sorted(json.loads(v)[1] for v in client.lrange("tasks", 0, -1)) == list(range(300))
    wait_until(lambda: outbox.pending() == 0, 10, "the sent rows to leave the journal")


def test_a_claim_older_than_the_process_now_holding_its_pid_is_given_back(tmp_path):
    # A pid is reused (a container restarted: the hub is pid 7 again): a claim made before the process
    # now holding the pid started is a dead process's. One made since is that live process's own.
    journal = Journal(lambda: tmp_path)
    journal.append([("t", [n]) for n in range(4)])
    alive = os.getppid()   # a process that lives throughout, and started before this test
    with contextlib.closing(sqlite3.connect(tmp_path / FILE, timeout=5, isolation_level=None)) as db:
        db.execute("UPDATE tasks SET claimed_by = ?, claimed_at = ? WHERE id <= 2", (alive, 1.0))   # 1970
        db.execute("UPDATE tasks SET claimed_by = ?, claimed_at = ? WHERE id > 2", (alive, time.time()))
    assert journal.reclaim() == 2
    assert [row[2] for row in journal.claim(10)] == [[0], [1]]
    assert claimed_by(tmp_path, alive) == 2


def test_an_older_versions_spool_files_are_sent_once(broker, tmp_path):
    # Before the journal, the spool was a JSON file per batch, claimed by renaming it `.<pid>.sending`;
    # a failed write left a `.*.json.tmp`. An upgrade sends what those files hold, and clears the debris.
    client = redis.Redis.from_url(broker.url, socket_timeout=1)
    spool = tmp_path / "spool"
    spool.mkdir()
    # A claimed file of a process that no longer exists (pid 2**22 + 1 is above Linux's pid_max default).
    (spool / f"1-1-0.json.{2**22 + 1}.sending").write_text('[["t", [7]], ["t", [8]]]')
    (spool / "2-1-0.json").write_text('[["t", [9]]]')
    debris = spool / ".3-1-0.json.tmp"
    debris.write_text("")
    os.utime(debris, (time.time() - 3600, time.time() - 3600))
    outbox = Outbox(lambda: spool, lambda task, args: client.rpush("tasks", args[0]), retry_seconds=0.2)
    assert outbox.pending() == 3
    outbox.start()
    wait_until(lambda: client.llen("tasks") == 3, 30, "the left spool to be sent")
    wait_until(lambda: outbox.pending() == 0, 10, "the sent rows to leave the journal")
    assert sorted(int(v) for v in client.lrange("tasks", 0, -1)) == [7, 8, 9]
    assert {path.name for path in spool.iterdir()} <= JOURNAL_FILES


def test_a_forked_child_starts_its_own_sender_and_sends_what_it_puts(broker, tmp_path):
    import os
    import signal

    client = redis.Redis.from_url(broker.url, socket_timeout=1)
    outbox = Outbox(lambda: tmp_path / "spool", lambda task, args: client.rpush("tasks", args[0]), retry_seconds=0.2)
    outbox.put("t", ["parent"])
    assert outbox.wait_idle(10)
    held, release = threading.Event(), threading.Event()

    def hold():   # another thread holds the outbox's lock at the fork, as the parent's sender may
        with outbox._idle:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    pid = os.fork()
    if pid == 0:   # the child: with the parent's locks it would wait forever (the alarm ends it)
        try:
            signal.alarm(10)
            fresh = redis.Redis.from_url(broker.url, socket_timeout=1)
            outbox.publish = lambda task, args: fresh.rpush("tasks", args[0])
            outbox.put("t", ["child"])
            os._exit(0 if outbox.wait_idle(5) else 1)
        finally:
            os._exit(2)
    release.set()
    holder.join(10)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert sorted(client.lrange("tasks", 0, -1)) == [b"child", b"parent"]

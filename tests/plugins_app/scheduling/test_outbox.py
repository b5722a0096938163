"""The task outbox (issue 29, item 5): tasks are published off the caller's path; while the broker is
away they are kept on disk, counted, and sent once it is back: none dropped."""

import subprocess
import threading

import pytest
import redis

from plugins_app.services.scheduling.outbox import Outbox
from tests.integration.celery_services import _pings, _require_redis_server, free_port, wait_until

pytestmark = pytest.mark.integration


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


def test_tasks_refused_while_the_broker_is_away_are_spooled_counted_and_sent_later(broker, tmp_path):
    client = redis.Redis.from_url(broker.url, socket_timeout=1, socket_connect_timeout=1)
    callers = set()

    def publish(task, args):
        callers.add(threading.current_thread().name)
        client.rpush("tasks", f"{task}:{args[0]}")

    counts = {}
    outbox = Outbox(lambda: tmp_path / "spool", publish, retry_seconds=0.2)
    outbox.on_count = lambda task, outcome: counts.__setitem__(outcome, counts.get(outcome, 0) + 1)
    outbox.put("t", [0])
    assert outbox.wait_idle(10) and counts == {"sent": 1}
    broker.stop()
    for n in range(1, 21):
        outbox.put("t", [n])
    assert outbox.wait_idle(20)
    assert counts.get("spooled") == 20 and outbox.pending() == 20   # kept on disk, not dropped
    broker.start()   # an empty broker on the same port: what it held before the outage is gone
    wait_until(lambda: client.llen("tasks") == 20, 30, "the spooled tasks to be sent")
    assert sorted(int(v.split(b":")[1]) for v in client.lrange("tasks", 0, -1)) == list(range(1, 21))
    assert counts == {"sent": 1, "spooled": 20, "resent": 20} and outbox.pending() == 0
    assert callers == {"task-outbox"}   # never the caller's thread: a request never waits on the broker


def test_a_spool_left_by_a_process_that_died_is_sent_by_another(broker, tmp_path):
    client = redis.Redis.from_url(broker.url, socket_timeout=1)
    spool = tmp_path / "spool"
    spool.mkdir()
    # A claimed file of a process that no longer exists (pid 2**22 + 1 is above Linux's pid_max default).
    (spool / f"1-1-0.json.{2**22 + 1}.sending").write_text('[["t", [7]], ["t", [8]]]')
    (spool / "2-1-0.json").write_text('[["t", [9]]]')
    outbox = Outbox(lambda: spool, lambda task, args: client.rpush("tasks", args[0]), retry_seconds=0.2)
    outbox.start()
    wait_until(lambda: client.llen("tasks") == 3, 30, "the left spool to be sent")
    assert sorted(int(v) for v in client.lrange("tasks", 0, -1)) == [7, 8, 9]
    assert list(spool.iterdir()) == []


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


def test_a_full_disk_leaves_no_temporary_files_and_logs_its_losses_once_per_interval(tmp_path, monkeypatch, caplog):
    # Issue 40, item 7: a full disk left an empty .*.json.tmp per failed write (1,546 in 40 s) and a
    # traceback per lost task (2,327).
    import errno
    import logging
    from pathlib import Path

    written = Path.write_text

    def full(self, data, *args, **kwargs):
        if tmp_path not in self.parents:   # the process's own outbox, or anything else: as it was
            return written(self, data, *args, **kwargs)
        self.touch()   # the file is created; its bytes find no room
        raise OSError(errno.ENOSPC, "No space left on device")

    def refused(task, args):
        raise ConnectionError("the broker is away")

    counts = {}
    outbox = Outbox(lambda: tmp_path / "spool", refused, retry_seconds=60)
    outbox.on_count = lambda task, outcome: counts.__setitem__(outcome, counts.get(outcome, 0) + 1)
    monkeypatch.setattr(Path, "write_text", full)
    with caplog.at_level(logging.WARNING, logger="plugins_app.services.scheduling.outbox"):
        for n in range(1000):
            outbox.put("t", [n])
        assert outbox.wait_idle(60)
    assert counts == {"lost": 1000}
    assert list((tmp_path / "spool").iterdir()) == []   # nothing half written left behind
    lines = [r for r in caplog.records if r.name == "plugins_app.services.scheduling.outbox"]
    assert 1 <= len(lines) <= 4, [r.getMessage() for r in lines]   # the outage and the losses, each once
    assert sum(r.exc_info is not None for r in lines) <= 1, [(r.getMessage()[:60], r.exc_info) for r in lines]

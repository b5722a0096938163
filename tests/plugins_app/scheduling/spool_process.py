"""A process of its own beside the outbox's tests (no Django): an Outbox on a spool directory, sending its
journal to a Redis list as `[pid, first argument]`, then exiting once the journal is empty.

    python -m tests.plugins_app.scheduling.spool_process MODE DIRECTORY REDIS_URL

MODE `send` sends; `hold` claims rows and never returns from its first publish (the test kills it
there); `wait` holds its first claimed rows until another process has sent a task, then sends."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import redis

from plugins_app.services.scheduling.outbox import Outbox

WAIT_SECONDS = 60   # a bound for `wait` and for the whole run: the test fails on its own deadline first


def main(mode: str, directory: str, url: str) -> int:
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    held = [mode in ("hold", "wait")]

    def publish(task: str, args: list) -> None:
        if held[0]:
            held[0] = False
            client.rpush("claimed", os.getpid())   # this process holds a batch of claimed rows now
            if mode == "hold":
                time.sleep(WAIT_SECONDS)   # killed here
                os._exit(3)
            deadline = time.monotonic() + WAIT_SECONDS
            while not client.llen("tasks") and time.monotonic() < deadline:   # the other sends meanwhile
                time.sleep(0.01)
        client.rpush("tasks", json.dumps([os.getpid(), args[0]]))

    outbox = Outbox(lambda: Path(directory), publish, retry_seconds=0.05)
    outbox.start()
    deadline = time.monotonic() + WAIT_SECONDS
    while outbox.pending() and time.monotonic() < deadline:
        time.sleep(0.02)
    return 0 if not outbox.pending() else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))

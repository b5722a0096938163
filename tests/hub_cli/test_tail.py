"""`hub tail` against a real hub with two gunicorn workers: a cancel arrives, filters apply on the
server, and another account's events never appear."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

from tests.hub_cli.conftest import Hub
from tests.plugins_app.serving import ROOT, Served

WAIT_SECONDS = 20   # a limit on waiting, not a timing assertion
CANCELLER = ("globalThis.middleware.userMessageInbound = async (c, tools) => {{\n"
             "  console.log('saw ' + c.text);\n"
             "  return tools.cancel({reason!r});\n"
             "}};\n")
CONTEXT = {"sessionId": "1", "channelId": None, "text": "hello", "mediaIds": []}


class Tail:
    """`hub tail --json ...` in the background, its stdout lines gathered by a thread."""

    def __init__(self, hub, key: str, *args: str, config_home: str):
        env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
        env.update(HUB_URL=hub.url, HUB_KEY=key, XDG_CONFIG_HOME=config_home)
        self.process = subprocess.Popen([sys.executable, "-m", "hub_cli", "tail", "--json", *args], cwd=ROOT,
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def next_event(self, until: float) -> dict:
        try:
            return self.lines.get(timeout=max(0.0, until - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no event from hub tail within {WAIT_SECONDS} s; stderr: {self.stop()}") from None

    def wait_for(self, kind: str) -> tuple[dict, list[dict]]:
        until, seen = time.monotonic() + WAIT_SECONDS, []
        while True:
            event = self.next_event(until)
            seen.append(event)
            if event["type"] == kind:
                return event, seen

    def stop(self) -> str:
        self.process.terminate()
        try:
            _, err = self.process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return err


def test_a_cancel_is_tailed_and_another_accounts_events_never_appear(hub, tmp_path):
    check_the_tail(hub, tmp_path)


def test_the_same_through_redis_pub_sub(redis_url, tmp_path):
    # A folder no one can create: were the file ring used after all, the tail would fail.
    served = Served(workers=2, HUB_TAIL_CHANNEL="redis", HUB_TAIL_REDIS_URL=redis_url,
                    HUB_TAIL_DIR="/proc/hub-tail-unusable")
    try:
        served.start()
        check_the_tail(Hub(served), tmp_path)
    finally:
        served.stop()


def check_the_tail(hub, tmp_path):
    mine, theirs = hub.new_key(), hub.new_key()
    hub.ok(mine, "POST", "plugins", {"name": "gatekeeper", "source": CANCELLER.format(reason="mine"),
                                     "language": "javascript"})
    hub.ok(theirs, "POST", "plugins", {"name": "intruder", "source": CANCELLER.format(reason="theirs"),
                                       "language": "javascript"})
    everything = Tail(hub, mine, config_home=str(tmp_path))
    cancels_only = Tail(hub, mine, "--status", "cancelled", config_home=str(tmp_path))
    try:
        everything.wait_for("ready")
        cancels_only.wait_for("ready")
        # Several calls, so that both gunicorn workers serve some: a run in either must reach the tails.
        for _ in range(3):
            hub.ok(theirs, "POST", "hooks/userMessageInbound/execute", {"context": CONTEXT})
        started = time.monotonic()
        answer = hub.ok(mine, "POST", "hooks/userMessageInbound/execute", {"context": CONTEXT})
        assert answer["outcome"] == "cancelled"
        cancel, seen = everything.wait_for("cancel")
        latency = time.monotonic() - started
        print(f"\ncancel tailed {latency * 1000:.0f} ms after the execute call returned")
        assert cancel["plugin"] == "gatekeeper" and cancel["reason"] == "mine" and cancel["hook"] == "userMessageInbound"
        kinds = {e["type"] for e in seen}
        assert {"run", "log", "cancel"} <= kinds
        assert any(e["type"] == "log" and e["message"] == "saw hello" for e in seen)
        # In the order it happened: the handler's log line, then its run, then its cancel.
        mine_seen = [e["type"] for e in seen if e.get("plugin") == "gatekeeper"]
        assert mine_seen[-3:] == ["log", "run", "cancel"], mine_seen
        filtered, before = cancels_only.wait_for("cancel")
        assert filtered["reason"] == "mine"
        assert all(e.get("status") == "cancelled" for e in before if e["type"] != "ready")
        everything_seen = seen + before
        assert not [e for e in everything_seen if e.get("plugin") == "intruder" or e.get("reason") == "theirs"]
    finally:
        everything.stop()
        cancels_only.stop()


def test_a_bad_filter_is_refused_by_the_hub(hub, cli):
    key = hub.new_key()
    refused = cli(key, "tail", "--status", "exploded", check_status=1)
    assert "'exploded' is not a status" in refused.stderr

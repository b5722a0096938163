"""The execute API served for real by gunicorn's ASGI worker (the default): the same answers as the
threaded worker, byte for byte but for durations, and calls waiting on a slow host.fetch hold no thread
each (the worker's threads counted from /proc while they wait)."""

import http.client
import json
import os
import re
import threading
import time
from pathlib import Path

from ..conftest import PROMPT, appender
from ..host.stubs import StubServer
from ..serving import Served

FETCHER = """globalThis.middleware.systemPrompt = async (c) => {
  const r = await host.fetch(URL);
  return c.systemPrompt + ' ' + (await r.text());
};"""
DURATIONS = re.compile(rb'"durationMs":[0-9.e-]+')
SERVERS_HEADERS = {"date", "server", "connection", "content-length", "transfer-encoding", "server-timing"}


def worker_pid(server: Served) -> int:
    """The one worker's pid: the gunicorn master's only child that is not the engine supervisor."""
    master = server.process.pid
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    workers = [int(pid) for pid in children
               if b"plugins_app.runtime" not in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(workers) == 1, workers
    return workers[0]


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def resident_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))


def connections_to(pid: int, port: int) -> int:
    """Established TCP connections the worker holds on the server's port (/proc/<pid>/net/tcp)."""
    count = 0
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state = fields[1], fields[3]
        if state == "01" and int(local.split(":")[1], 16) == port:
            count += 1
    return count


def setup_account(server: Served, source: str, grant: tuple = ()) -> dict:
    key = server.manage("create_api_key", "acme").strip().splitlines()[-1]
    auth = {"Authorization": f"Bearer {key}"}
    status, _, body = server.request("POST", "/api/v1/plugins", {
        "name": "plugin", "source": source, "language": "javascript", "grant": list(grant)}, auth)
    assert status == 201, body
    return auth


def answers(server: Served, auth: dict) -> list:
    """A few execute calls: a changed chain, a bad context, an unknown hook, a bad key, a bad body."""
    calls = [("systemPrompt", {"context": PROMPT}, auth),
             ("systemPrompt", {"context": {"sessionId": "1"}}, auth),
             ("noSuchHook", {"context": PROMPT}, auth),
             ("systemPrompt", {"context": PROMPT}, {"Authorization": "Bearer mh_nope_nope"}),
             ("systemPrompt", {"context": PROMPT, "extra": 1}, auth)]
    found = []
    for hook, body, headers in calls:
        status, head, content = server.request("POST", f"/api/v1/hooks/{hook}/execute", body, headers)
        timing = head.get("Server-Timing", "")
        # Every header the hub sets (the security headers the execute path's own middleware chain
        # must still give: plugins_app/api/execution/asgi_handler.py), not those of the HTTP server.
        own = sorted((name.lower(), value) for name, value in head.items()
                     if name.lower() not in SERVERS_HEADERS)
        found.append((status, own, re.sub(r"dur=[0-9.]+", "dur=", timing), DURATIONS.sub(b'"durationMs":0', content)))
    return found


def test_the_asgi_worker_answers_as_the_threaded_worker_did():
    seen = {}
    for worker in ("gthread", "asgi"):
        server = Served(workers=1, HUB_WORKER_CLASS=worker).start()
        try:
            seen[worker] = answers(server, setup_account(server, appender("!")))
        finally:
            server.stop()
    assert seen["asgi"] == seen["gthread"]
    assert [a[0] for a in seen["asgi"]] == [200, 400, 404, 401, 400]
    assert json.loads(seen["asgi"][0][3])["value"] == "base!"
    assert seen["asgi"][0][2].startswith("chain;dur=, h0;dur=")
    assert ("x-frame-options", "DENY") in seen["asgi"][0][1]
    assert ("x-content-type-options", "nosniff") in seen["asgi"][0][1]


def test_calls_waiting_on_a_slow_fetch_hold_no_thread_each():
    """CALLS calls of one account whose plugin awaits host.fetch; the loopback site holds the fetches
    until every call has reached the worker, then answers them all. Meanwhile the worker's threads are
    counted: a thread per waiting call (the gthread worker) would be CALLS of them at least. Twice: the
    second burst's memory is what a waiting call costs once the worker is warm."""
    calls, step_threads = 40, 4
    release, fetched = threading.Event(), threading.Event()

    def hold(req):
        fetched.set()
        release.wait(60)
        return 200, {"Content-Type": "text/plain"}, b"ok"

    site = StubServer(hold)
    # No queue deadline: 40 calls of one account at once take the account's one place in turn, and on a
    # loaded machine the last would be shed (a 503, load shedding's job); this test counts threads.
    server = Served(workers=1, HUB_FETCH_ALLOW_PRIVATE="1", HUB_WORKER_THREADS=str(step_threads),
                    HUB_EXECUTE_QUEUE_DEADLINE_MS="0").start()
    try:
        auth = setup_account(server, FETCHER.replace("URL", repr(site.url + "/check")), ("host:fetch",))
        pid = worker_pid(server)

        def call(results: list):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
            try:
                conn.request("POST", "/api/v1/hooks/systemPrompt/execute", json.dumps({"context": PROMPT}),
                             {"Content-Type": "application/json", **auth})
                response = conn.getresponse()
                results.append((response.status, json.loads(response.read())))
            finally:
                conn.close()

        for burst in ("first", "warm"):
            release.clear()
            fetched.clear()
            idle_threads, idle_kib = threads_of(pid), resident_kib(pid)
            results: list = []
            callers = [threading.Thread(target=call, args=(results,), daemon=True) for _ in range(calls)]
            for caller in callers:
                caller.start()
            assert fetched.wait(60), "no chain reached its host.fetch"
            deadline = time.monotonic() + 60
            while connections_to(pid, server.port) < calls:   # every call is in the worker, waiting
                assert time.monotonic() < deadline, connections_to(pid, server.port)
                time.sleep(0.02)
            waiting_threads, waiting_kib = threads_of(pid), resident_kib(pid)
            release.set()
            for caller in callers:
                caller.join(120)
            assert [status for status, _ in results] == [200] * calls
            assert {body["value"] for _, body in results} == {"base ok"}
            print(f"\n{burst} burst: worker threads {idle_threads} idle, {waiting_threads} with {calls} calls "
                  f"waiting; resident {idle_kib} KiB idle, {(waiting_kib - idle_kib) / calls:+.1f} KiB per waiting call")
            # The loop's thread, the step pool, the host-member and resolver pools, the metrics thread:
            # bounded by the pools' sizes, not by the calls.
            assert waiting_threads < calls
    finally:
        release.set()
        server.stop()
        site.close()

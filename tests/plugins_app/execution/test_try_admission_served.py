"""Issue 39, item 6, served as production serves it (gunicorn's ASGI worker): 32 connections of one account
hammering /try leave another account's execute calls answered, because try-runs take their account's
turns like execute calls and what cannot start within the queue deadline is shed with a 503."""

import http.client
import json
import threading

from ..conftest import PROMPT, appender
from ..serving import Served

TRY_CONNECTIONS = 32
VICTIM_CALLS = 24
# Each try-run keeps its engine busy ~200 ms: 32 of them one after another need far more than the
# 1 s deadline, so most of them must be shed, however fast the machine.
BUSY = """globalThis.middleware.systemPrompt = async (c) => {
  const t = Date.now(); while (Date.now() - t < 200) {} return c.systemPrompt + '?';
};"""


def make_account(server: Served, name: str, source: str) -> dict:
    key = server.manage("create_api_key", name).strip().splitlines()[-1]
    auth = {"Authorization": f"Bearer {key}"}
    status, _, body = server.request("POST", "/api/v1/plugins", {
        "name": "plugin", "source": source, "language": "javascript"}, auth)
    assert status == 201, body
    return auth


def post(server: Served, path: str, auth: dict) -> tuple[int, dict, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)   # (header names: lower case)
    try:
        conn.request("POST", path, json.dumps({"context": PROMPT}), {"Content-Type": "application/json", **auth})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(response.read())
    finally:
        conn.close()


def test_thirty_two_try_connections_of_one_account_leave_another_accounts_execute_calls_answered():
    server = Served(workers=1, HUB_WORKER_CLASS="asgi").start()
    try:
        tenant = make_account(server, "tenant", BUSY)
        victim = make_account(server, "victim", appender("!"))
        tries: list = []
        executes: list = []
        go = threading.Barrier(TRY_CONNECTIONS + 1)

        def tenant_try():
            go.wait(60)
            tries.append(post(server, "/api/v1/hooks/systemPrompt/try", tenant))

        def victim_calls():
            go.wait(60)
            for _ in range(VICTIM_CALLS):
                executes.append(post(server, "/api/v1/hooks/systemPrompt/execute", victim))

        threads = [threading.Thread(target=tenant_try, daemon=True) for _ in range(TRY_CONNECTIONS)]
        threads.append(threading.Thread(target=victim_calls, daemon=True))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(180)
        # The victim: every call answered, and its chain ran.
        assert len(executes) == VICTIM_CALLS
        assert [(status, body.get("value")) for status, _, body in executes] == [(200, "base!")] * VICTIM_CALLS
        # The tenant: each try-run either ran (its stand-in-free chain changed the prompt) or was shed
        # with a JSON 503 naming the reason and saying when to come back; never anything else.
        assert len(tries) == TRY_CONNECTIONS
        ran = [body for status, _, body in tries if status == 200]
        shed = [(head, body) for status, head, body in tries if status == 503]
        assert len(ran) + len(shed) == TRY_CONNECTIONS
        assert all(body["value"] == "base?" for body in ran)
        assert shed, "32 try-runs of ~200 ms each, one at a time, cannot all start within 1 s"
        assert all(body["error"]["code"] == "overloaded" and head.get("retry-after") == "1" for head, body in shed)
    finally:
        server.stop()

"""`POST /api/v1/hooks/{hook}/try` acts on nothing (issue 39, item 6): the replay's stand-ins answer every
call that writes or reaches outside the hub, listed in wouldCall; an admin may make plain GET/HEAD reads
live; and a try-run takes its account's turns, shed like an execute call when it cannot start in time."""

import json
import threading
from dataclasses import replace

import pytest

from accounts.models import parse_key
from plugins_app.models import CancelLog, WorkspaceFile
from plugins_app.services.engine import admission
from plugins_app.services.engine.admission import FairGate

from ..conftest import PROMPT
from ..host.stubs import StubServer, json_answer, reporter

pytestmark = pytest.mark.django_db

# A plugin that would write a workspace file, read it back, POST to a server and GET from it.
ACTOR = """(async () => {{
  const written = await host.workspace.write('notes/today.md', 'hello');
  const text = await host.workspace.read('notes/today.md');
  const posted = await host.fetch('{site}/orders', {{method: 'POST', body: '{{"n": 1}}'}});
  const got = await host.fetch('{site}/items');
  return {{written, text, posted: posted.status, got: got.status}};
}})()"""


@pytest.fixture
def site(settings):
    server = StubServer(lambda req: json_answer(200, {"items": []}))
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)
    yield server
    server.close()


@pytest.fixture
def actor(install, site):
    return install(reporter("systemPrompt", ACTOR.format(site=site.url)), name="actor",
                   grant=["host:workspace", "host:fetch"])


def try_run(client, hook="systemPrompt", **body):
    response = client.post(f"/api/v1/hooks/{hook}/try", {"context": PROMPT, **body}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_try_run_writes_no_file_and_sends_nothing_and_says_what_it_would_have_done(api_client, actor, site):
    body = try_run(api_client)
    assert site.requests == []                        # the server saw nothing at all
    assert not WorkspaceFile.objects.exists()         # and no file was written
    seen = json.loads(body["value"])["ok"]
    # The write was stood in for (a replay's reading members run for real: there is no file to read);
    # the fetches got the stand-in's status 0.
    assert seen == {"written": {"dryRun": True}, "text": None, "posted": 0, "got": 0}
    assert [c["member"] for c in body["wouldCall"]] == ["host.workspace.write", "host.fetch", "host.fetch"]
    assert body["wouldCall"][1]["args"][1]["method"] == "POST"
    assert body["liveReads"] is False
    assert not CancelLog.objects.exists()


def test_live_reads_make_the_plain_get_only(api_client, actor, site):
    body = try_run(api_client, liveReads=True)
    assert [(r.method, r.path) for r in site.requests] == [("GET", "/items")]   # never the POST
    assert json.loads(body["value"])["ok"]["got"] == 200
    assert [c["member"] for c in body["wouldCall"]] == ["host.workspace.write", "host.fetch"]
    assert body["liveReads"] is True and not WorkspaceFile.objects.exists()


def test_a_bad_live_reads_flag_is_refused_naming_it(api_client, actor, site):
    response = api_client.post("/api/v1/hooks/systemPrompt/try", {"context": PROMPT, "liveReads": "perhaps"},
                               format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "liveReads"
    assert site.requests == []


@pytest.fixture
def strict_gate():
    """This process's gate with a short queue deadline, put back afterwards."""
    before = admission._gate
    admission._gate = FairGate(per_account=1, shed_after=0.05)
    yield admission._gate
    admission._gate = before


@pytest.mark.parametrize("path", ["/api/v1/hooks/systemPrompt/execute", "/api/v1/hooks/systemPrompt/try"])
def test_a_call_that_cannot_start_in_time_is_answered_503_with_retry_after_and_nothing_runs(
        api_client, api_key, install, strict_gate, path):
    install("globalThis.middleware.systemPrompt = async (c, t) => t.cancel('ran');", name="canceller")
    line = admission.line_for(parse_key(api_key))
    taken, done = threading.Event(), threading.Event()

    def hold_the_accounts_turn():
        with strict_gate.turn(line):
            taken.set()
            done.wait(10)

    holder = threading.Thread(target=hold_the_accounts_turn, daemon=True)
    holder.start()
    assert taken.wait(10)
    try:
        response = api_client.post(path, {"context": PROMPT}, format="json")
    finally:
        done.set()
        holder.join(10)
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"] == "1"
    error = response.json()["error"]
    assert error["code"] == "overloaded" and error["retryAfter"] == 1
    assert "could not start within" in error["message"]
    assert not CancelLog.objects.exists()
    # The books are clean: the account's next call runs.
    assert api_client.post(path, {"context": PROMPT}, format="json").status_code == 200


def test_a_members_own_dry_run_answer_is_called_with_the_runs_overlay_and_listed(account, monkeypatch):
    """The plug point for members whose dry run keeps state (host.kv's overlay): `@member(dry_run=fn)`
    answers a stood-in call with fn(call, args); calls of one run share `call.overlay`."""
    from plugins_app.runtime.tables.hooks import HOOKS
    from plugins_app.runtime.web.chain import Handler
    from plugins_app.services.execution import host_bridge

    def remember(call, args):
        assert call.dry_run
        kept = call.overlay.setdefault("test", [])
        kept.append(args[0])
        return {"dryRun": True, "kept": list(kept)}

    monkeypatch.setitem(host_bridge.DRY_RUNS, "workspace.write", remember)
    bridge = host_bridge.HostBridge(account, HOOKS["systemPrompt"], PROMPT, dry_run=True, record=False)
    writer = Handler("1", "writer", "hash", "", granted=frozenset({"host:workspace"}))
    assert bridge(writer, "workspace.write", ["a", "x"]) == {"dryRun": True, "kept": ["a"]}
    assert bridge(writer, "workspace.write", ["b", "y"]) == {"dryRun": True, "kept": ["a", "b"]}
    assert [c["standIn"]["kept"] for c in bridge.would_call] == [["a"], ["a", "b"]]
    assert not WorkspaceFile.objects.exists()

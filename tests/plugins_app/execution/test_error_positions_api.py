"""A TypeScript plugin's run-time error at its .ts line: in the try API's trace (`at`), in the warning
an execute call records and in GET /api/v1/warnings (text and `at`), and in a replay."""

import pytest

from ..conftest import PROMPT

pytestmark = pytest.mark.django_db

TS = """type Words = string[];

interface Options {
  limit: number;
}

const options: Options = { limit: 3 };

globalThis.middleware.systemPrompt = async (c) => {
  const words: Words = c.systemPrompt.split(" ");
  const last = (words as any)[options.limit].toUpperCase();
  return c.systemPrompt + last;
};
"""
LINE = 11
COLUMN = TS.splitlines()[LINE - 1].index("toUpperCase") + 1


@pytest.fixture
def broken(api_client):
    response = api_client.post("/api/v1/plugins", {"name": "Broken", "language": "typescript", "source": TS,
                                                   "typecheck": True}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["installationId"]


def test_try_shows_the_ts_line(api_client, broken):
    step = api_client.post("/api/v1/hooks/systemPrompt/try", {"context": PROMPT}, format="json").json()["trace"][0]
    assert step["status"] == "error"
    assert step["at"] == {"line": LINE, "column": COLUMN}
    assert step["warning"].endswith(f"(at line {LINE}, column {COLUMN})")


def test_a_recorded_warning_carries_the_ts_line(api_client, broken):
    executed = api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json").json()
    assert executed["value"] == PROMPT["systemPrompt"]   # fail-open, as before
    assert "at" not in executed["trace"][0]             # execute's answer keeps its shape
    warning = api_client.get("/api/v1/warnings").json()["results"][0]
    assert warning["installationId"] == broken
    assert warning["at"] == {"line": LINE, "column": COLUMN}
    assert f"(at line {LINE}, column {COLUMN})" in warning["message"]


def test_a_malformed_result_warning_points_at_its_handler(api_client):
    source = "// answers a number\nglobalThis.middleware.systemPrompt = async () => 42;"
    api_client.post("/api/v1/plugins", {"name": "Wrong", "language": "javascript", "source": source}, format="json")
    api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json")
    warning = api_client.get("/api/v1/warnings").json()["results"][0]
    assert warning["at"] == {"line": 2, "column": source.splitlines()[1].index("async") + 1, "handler": True}


def test_a_replay_against_a_draft_shows_the_ts_line(api_client):
    guard = api_client.post("/api/v1/plugins", {
        "name": "Guard", "language": "typescript",
        "source": "globalThis.middleware.userMessageInbound = async (c, tools) => tools.cancel('no');"},
        format="json").json()
    inbound = {"sessionId": "10", "channelId": None, "text": "hi", "mediaIds": []}
    api_client.post("/api/v1/hooks/userMessageInbound/execute", {"context": inbound}, format="json")
    entry = api_client.get("/api/v1/cancellations").json()["results"][0]
    drafted = api_client.post(f"/api/v1/plugins/{guard['installationId']}/versions",
                              {"source": TS.replace("c.systemPrompt", "c.text").replace(".systemPrompt", ".userMessageInbound"),
                               "language": "typescript"}, format="json").json()
    body = api_client.post(f"/api/v1/cancellations/{entry['id']}/replay",
                           {"installationId": guard["installationId"], "version": str(drafted["number"])},
                           format="json").json()
    assert body["replayed"]["trace"][0]["at"] == {"line": LINE, "column": COLUMN}

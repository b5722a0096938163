"""`hub dev`'s host.kv: the hub's checks, a store the session keeps, and --kv FILE seeding it and keeping
each run's writes."""

import json

import pytest

from hub_cli import dev
from hub_cli.local_kv import LocalKv
from plugins_app.runtime.web.chain import HostError

COUNTER = """globalThis.middleware.systemPrompt = async (c) => {
  const n = await host.kv.incr('runs', 1, {max: 3});
  return c.systemPrompt + ' ' + JSON.stringify([n, await host.kv.get('seed')]);
};"""


@pytest.fixture(scope="module")
def runner():
    runner = dev.Runner()
    yield runner
    runner.close()


def test_a_seeded_file_is_read_and_each_runs_writes_are_saved(runner, tmp_path):
    plugin = tmp_path / "counter.js"
    plugin.write_text(COUNTER)
    store = tmp_path / "kv.json"
    store.write_text(json.dumps({"seed": {"from": "file"}, "runs": 2}))
    kv = LocalKv(store)
    compiled = runner.compile(plugin)
    first = runner.run(compiled, "systemPrompt", dev.sample_context("systemPrompt"), kv=kv)
    kv.save()
    second = runner.run(compiled, "systemPrompt", dev.sample_context("systemPrompt"), kv=kv)
    assert first.after.endswith(' [3,{"from":"file"}]')
    assert second.after.endswith(' [{"ok":false,"value":3},{"from":"file"}]')
    assert [c["member"] for c in first.host_calls] == ["host.kv.incr", "host.kv.get"]
    assert json.loads(store.read_text()) == {"seed": {"from": "file"}, "runs": 3}


def test_the_local_store_refuses_what_the_hub_refuses(tmp_path):
    kv = LocalKv()
    with pytest.raises(HostError, match="host.kv.put: the value is 70002 bytes as JSON"):
        kv.answer("put", ["k", "x" * 70000])
    with pytest.raises(HostError, match="host.kv.get: the key must be a string, not a number"):
        kv.answer("get", [1])
    kv.answer("put", ["s", "text"])
    with pytest.raises(HostError, match="not an integer counter"):
        kv.answer("incr", ["s"])
    kv.answer("put", ["a", 1, {"ttlSeconds": 0.01}])
    assert kv.answer("list", [{"limit": 1}]) == {"keys": [{"key": "a", "size": 9, "expiresAt": None}], "cursor": "a"}
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        LocalKv(bad)

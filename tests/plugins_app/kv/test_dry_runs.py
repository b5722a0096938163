"""A run that records nothing (try, replay, shadow) reads the real store and writes nothing to it: its
writes land in an overlay that the rest of the run reads, is listed in wouldCall, and is dropped."""

import json

import pytest

from plugins_app.models import KvEntry
from plugins_app.services.execution.invoke import Mode, invoke
from plugins_app.services.execution.tryit import try_chain
from plugins_app.services.kv import checks, store

from ..conftest import PROMPT
from ..host.stubs import reporter

pytestmark = pytest.mark.django_db

SCRIPT = """(async () => {
  const kv = host.kv;
  const before = await kv.get('seen');
  const counted = await kv.incr('seen', 2);
  await kv.put('fresh', {a: 1}, {ttlSeconds: 60});
  const capped = await kv.incr('seen', 1, {max: 7});
  await kv.delete('old');
  const listed = (await kv.list()).keys.map((k) => k.key);
  return {before, counted, capped, fresh: await kv.get('fresh'), old: await kv.get('old'), listed,
          seen: await kv.get('seen')};
})()"""
EXPECTED = {"before": 5, "counted": 7, "capped": {"ok": False, "value": 7}, "fresh": {"a": 1}, "old": None,
            "listed": ["fresh", "seen"], "seen": 7}


@pytest.fixture
def seeded(install):
    installation = install(reporter("systemPrompt", SCRIPT), grant=["host:kv"])
    ns = store.Namespace(installation.account_id, installation.pk)
    store.put(ns, "seen", checks.value(5), None)
    store.put(ns, "old", checks.value("x"), None)
    return installation


def _stored():
    return sorted(KvEntry.objects.values_list("key", "value", "number", "expires_at"))


@pytest.mark.parametrize("mode", [Mode.REPLAY, Mode.SHADOW, Mode.TRY])
def test_nothing_is_written_and_the_writes_are_listed(account, seeded, mode):
    before = _stored()
    invocation = invoke(account, "systemPrompt", PROMPT, mode=mode, origin=mode.value)
    assert json.loads(invocation.result.value) == {"ok": EXPECTED}
    assert _stored() == before
    listed = [(c["member"], c["args"], c["standIn"]) for c in invocation.would_call]
    assert listed == [("host.kv.incr", ["seen", 2], 7), ("host.kv.put", ["fresh", {"a": 1}, {"ttlSeconds": 60}], None),
                      ("host.kv.incr", ["seen", 1, {"max": 7}], {"ok": False, "value": 7}),
                      ("host.kv.delete", ["old"], {"deleted": True})]


def test_the_try_it_page_writes_nothing(account, seeded):
    before = _stored()
    run = try_chain(account, "systemPrompt", PROMPT)
    assert json.loads(run.after) == {"ok": EXPECTED}
    assert _stored() == before


def test_a_live_run_writes(account, seeded):
    invocation = invoke(account, "systemPrompt", PROMPT, mode=Mode.LIVE)
    assert json.loads(invocation.result.value) == {"ok": EXPECTED}
    assert invocation.would_call == []
    assert sorted(KvEntry.objects.values_list("key", flat=True)) == ["fresh", "seen"]

"""host.kv through the execute API: every member, its bad input, expiry, quotas and whose keys they are."""

import json
from dataclasses import replace

import pytest
from django.utils import timezone

from plugins_app.models import KvEntry, UsageDaily
from plugins_app.services.kv import checks, store

from ..conftest import PROMPT
from ..host.stubs import execute, reporter

pytestmark = pytest.mark.django_db

KV = ["host:kv"]


def run(api_client, install, expression, **kw):
    installation = install(reporter("systemPrompt", expression), grant=KV, **kw)
    return json.loads(execute(api_client, "systemPrompt", PROMPT)["value"]), installation


def test_every_member(api_client, install):
    script = """(async () => {
      const kv = host.kv;
      const missing = await kv.get('a');
      await kv.put('a', {n: [1, 'x', null]});
      await kv.put('b', 'text');
      await kv.put('n', 5);
      const a = await kv.get('a');
      const first = await kv.incr('n');
      const second = await kv.incr('n', 10);
      const fresh = await kv.incr('c', -2);
      const listed = await kv.list();
      const page = await kv.list({prefix: '', limit: 2});
      const rest = await kv.list({limit: 2, cursor: page.cursor});
      const gone = await kv.delete('b');
      const again = await kv.delete('b');
      return {missing, a, first, second, fresh, keys: listed.keys.map((k) => [k.key, k.size, k.expiresAt]),
              end: listed.cursor, page: page.keys.map((k) => k.key), cursor: page.cursor,
              rest: rest.keys.map((k) => k.key), restCursor: rest.cursor, gone, again, b: await kv.get('b')};
    })()"""
    result, installation = run(api_client, install, script)
    assert result == {"ok": {
        "missing": None, "a": {"n": [1, "x", None]}, "first": 6, "second": 16, "fresh": -2,
        "keys": [["a", 19, None], ["b", 7, None], ["c", 9, None], ["n", 9, None]], "end": None,
        "page": ["a", "b"], "cursor": "b", "rest": ["c", "n"], "restCursor": None,
        "gone": {"deleted": True}, "again": {"deleted": False}, "b": None}}
    assert dict(KvEntry.objects.values_list("key", "installation")) == {
        "a": installation.pk, "c": installation.pk, "n": installation.pk}


def test_incr_refuses_to_pass_max_and_changes_nothing(api_client, install):
    script = """(async () => {
      const steps = [];
      for (let i = 0; i < 4; i++) steps.push(await host.kv.incr('hits', 1, {max: 3}));
      steps.push(await host.kv.incr('big', 5, {max: 3}));
      return steps;
    })()"""
    result, _ = run(api_client, install, script)
    assert result == {"ok": [1, 2, 3, {"ok": False, "value": 3}, {"ok": False, "value": 0}]}
    assert dict(KvEntry.objects.values_list("key", "number")) == {"hits": 3}


@pytest.mark.parametrize(("expression", "message"), [
    ("host.kv.get(42)", "host.kv.get: the key must be a string, not a number"),
    ("host.kv.get('')", "host.kv.get: the key must be 1 to 512 bytes of UTF-8 (this one is 0)"),
    ("host.kv.get('é'.repeat(257))", "host.kv.get: the key must be 1 to 512 bytes of UTF-8 (this one is 514)"),
    ("host.kv.put('k')", "host.kv.put: give a key and a value"),
    ("host.kv.put('k', 'x'.repeat(70000))", "host.kv.put: the value is 70002 bytes as JSON, over the limit of 65536"),
    ("host.kv.put('k', 1, {ttl: 3})", "host.kv.put: unknown option 'ttl'; allowed: ttlSeconds"),
    ("host.kv.put('k', 1, {ttlSeconds: -1})", "host.kv.put: ttlSeconds must be a number of seconds above 0"),
    ("host.kv.put('k', 1, 'soon')", "host.kv.put: the options must be an object, not a string"),
    ("host.kv.incr('k', 1.5)", "host.kv.incr: by must be an integer"),
    ("host.kv.incr('k', 1, {max: 'ten'})", "host.kv.incr: max must be an integer"),
    ("host.kv.put('s', 'x').then(() => host.kv.incr('s'))",
     "host.kv.incr: the key holds a value that is not an integer counter"),
    ("host.kv.list({limit: 0})", "host.kv.list: limit must be an integer from 1 to 1000"),
    ("host.kv.list({prefix: 3})", "host.kv.list: prefix must be a string of at most 512 bytes"),
    ("host.kv.delete(null)", "host.kv.delete: the key must be a string, not null"),
])
def test_bad_input_rejects_with_the_reason(api_client, install, expression, message):
    result, _ = run(api_client, install, expression)
    assert result["error"].startswith(message), result
    assert not KvEntry.objects.exclude(key="s").exists()


def test_without_the_permission_the_call_is_refused(api_client, install):
    install(reporter("systemPrompt", "host.kv.get('a')"), grant=[])
    result = json.loads(execute(api_client, "systemPrompt", PROMPT)["value"])
    assert "needs the host:kv permission" in result["error"]


def test_an_expired_key_reads_as_missing_and_the_sweep_deletes_it(api_client, install):
    result, installation = run(api_client, install, """(async () => {
      await host.kv.put('short', 1, {ttlSeconds: 60});
      await host.kv.put('long', 2);
      await host.kv.incr('window', 1, {ttlSeconds: 60});
      return host.kv.get('short');
    })()""")
    assert result == {"ok": 1}
    KvEntry.objects.filter(key__in=["short", "window"]).update(expires_at=timezone.now() - timezone.timedelta(seconds=1))
    ns = store.Namespace(installation.account_id, installation.pk)
    assert store.get(ns, "short") is None
    assert [k["key"] for k in store.list_keys(ns, "", 10, "")["keys"]] == ["long"]
    assert store.incr(ns, "window", 1, 60, None) == 1   # an expired counter starts again, with a new window
    assert KvEntry.objects.get(key="window").expires_at > timezone.now()
    assert store.sweep() == 1
    assert sorted(KvEntry.objects.values_list("key", flat=True)) == ["long", "window"]


def test_quota_of_keys_and_bytes_per_account(api_client, install, settings):
    settings.HUB_KV = replace(settings.HUB_KV, max_keys=2, max_bytes=40)
    result, _ = run(api_client, install, """(async () => {
      const out = [];
      const attempt = async (f) => { try { out.push(await f()); } catch (e) { out.push(e.message); } };
      await attempt(() => host.kv.put('a', 'x'));
      await attempt(() => host.kv.incr('b'));
      await attempt(() => host.kv.put('c', 'x'));       // a third key
      await attempt(() => host.kv.incr('d'));
      await attempt(() => host.kv.put('a', 'y'.repeat(40)));  // bytes
      await attempt(() => host.kv.put('a', 'z'));       // rewriting a key within the quota
      await attempt(() => host.kv.incr('b'));           // counting on an existing key
      return [out, await host.kv.get('a')];
    })()""")
    assert result == {"ok": [[None, 1, "host.kv.put: kv quota exceeded", "host.kv.incr: kv quota exceeded",
                              "host.kv.put: kv quota exceeded", None, 2], "z"]}


def test_installations_and_accounts_do_not_see_each_others_keys(api_client, other_api_client, install, other_account):
    first = install(reporter("systemPrompt", "host.kv.put('k', 'first').then(() => host.kv.get('k'))"), grant=KV)
    theirs = install(reporter("systemPrompt", "host.kv.put('k', 'theirs').then(() => host.kv.get('k'))"),
                     grant=KV, target=other_account)
    assert json.loads(execute(other_api_client, "systemPrompt", PROMPT)["value"]) == {"ok": "theirs"}
    assert json.loads(execute(api_client, "systemPrompt", PROMPT)["value"]) == {"ok": "first"}
    second = install(reporter("systemPrompt", "host.kv.get('k')"), grant=KV)
    assert store.get(store.Namespace(second.account_id, second.pk), "k") is None
    assert sorted(KvEntry.objects.values_list("installation", "value")) == sorted(
        [(first.pk, '"first"'), (theirs.pk, '"theirs"')])


def test_usage_counts_reads_and_writes(api_client, install):
    run(api_client, install, "host.kv.put('a', 1).then(() => host.kv.get('a')).then(() => host.kv.incr('a'))")
    row = UsageDaily.objects.get(hook="systemPrompt")
    assert (row.runs, row.kv_reads, row.kv_writes) == (1, 1, 2)


def test_beat_sweeps_expired_keys(install):
    from middleware_hub.celery import app
    from plugins_app import tasks
    from plugins_app.services.scheduling.task_queue import ROUTES, SWEEP_KV

    assert [e["task"] for e in app.conf.beat_schedule.values()].count(SWEEP_KV) == 1
    assert SWEEP_KV in app.tasks and ROUTES[SWEEP_KV] == "timers"
    installation = install(reporter("systemPrompt", "1"))
    ns = store.Namespace(installation.account_id, installation.pk)
    store.put(ns, "gone", checks.value(1), 60)
    store.put(ns, "kept", checks.value(1), 60)
    KvEntry.objects.filter(key="gone").update(expires_at=timezone.now())
    assert tasks.sweep_kv() == 1
    assert list(KvEntry.objects.values_list("key", flat=True)) == ["kept"]

"""Web APIs from npm polyfills, tested from inside plugins: performance, structuredClone, URL, AbortController, crypto."""

import hashlib
import json
import re

from .conftest import PROMPT_CONTEXT


def run_prompt(make_handler, chain, body, *others):
    """Runs `body` (a handler's statements) as a systemPrompt handler after `others`; its result."""
    handlers = [make_handler(o) for o in others]
    handlers.append(make_handler(f"globalThis.middleware.systemPrompt = async (c) => {{\n{body}\n}};"))
    result = chain("systemPrompt", handlers, PROMPT_CONTEXT)
    for entry in result.trace:
        assert entry.status == "ran", entry.warning
    return result.value


TAMPER = """
globalThis.middleware.systemPrompt = async (c) => {
  const tries = %s;
  return tries.map((f) => { try { f(); return 'changed'; } catch (e) { return e.constructor.name; } }).join(',');
};"""


def tamper_results(make_handler, chain, tries):
    result = chain("systemPrompt", [make_handler(TAMPER % tries)], PROMPT_CONTEXT)
    assert result.trace[0].status == "ran", result.trace[0].warning
    return set(result.value.split(","))


def test_performance_now_is_monotonic_and_hardened(make_handler, chain):
    value = run_prompt(make_handler, chain, """
  const first = performance.now();
  let steady = true, last = first;
  for (let i = 0; i < 2000; i++) { const t = performance.now(); if (t < last) steady = false; last = t; }
  await new Promise((resolve) => setTimeout(resolve, 20));
  const later = performance.now();
  return [typeof first, first >= 0, steady, later - first >= 19,
          performance.timeOrigin + later <= Date.now()].join(',');""")
    assert value == "number,true,true,true,true"
    assert tamper_results(make_handler, chain, "[() => { performance.now = () => 0; }, () => { performance.timeOrigin = 1; },"
                          " () => { delete performance.now; }]") == {"TypeError"}


def test_structured_clone_copies_deeply_and_refuses_functions(make_handler, chain):
    value = run_prompt(make_handler, chain, """
  const source = { when: new Date(5), map: new Map([['k', { n: 1 }]]), set: new Set([1, 2]), re: /a+/gi,
                   bytes: new Uint8Array([1, 2, 3]), big: 10n, nested: { list: [1, { deep: true }] } };
  source.self = source;
  const copy = structuredClone(source);
  copy.nested.list[1].deep = false;
  copy.map.get('k').n = 2;
  let refused = 'no';
  try { structuredClone({ f() {} }); } catch (e) { refused = e.constructor.name; }
  return [copy !== source, copy.self === copy, copy.when instanceof Date, copy.when.getTime(),
          copy.map.get('k').n, source.map.get('k').n, [...copy.set].join('+'), copy.re.source + copy.re.flags,
          copy.bytes instanceof Uint8Array && copy.bytes.join(''), typeof copy.big,
          source.nested.list[1].deep, refused].join(',');""")
    assert value == "true,true,true,5,2,1,1+2,a+gi,123,bigint,true,TypeError"
    assert tamper_results(make_handler, chain, "[() => { structuredClone.hack = 1; },"
                          " () => { Object.setPrototypeOf(structuredClone, null); }]") == {"TypeError"}


def test_url_and_search_params_parse_the_whatwg_way(make_handler, chain):
    value = run_prompt(make_handler, chain, """
  const u = new URL('../c/./d?x=1&y=a%20b#frag', 'https://User:pw@Example.COM:443/a/b/');
  u.searchParams.append('z', 'ä &');
  const idn = new URL('http://münchen.de/ü');
  const q = new URLSearchParams({ b: '2', a: '1' }); q.sort();
  let invalid = 'no';
  try { new URL('not a url'); } catch (e) { invalid = e.constructor.name; }
  return [u.href, u.host, u.pathname, u.searchParams.get('y'), idn.hostname, idn.pathname, q.toString(),
          JSON.stringify(u) === JSON.stringify(u.href), invalid, URL.canParse('a:b'), URL.canParse('/x')].join(' | ');""")
    assert value == ("https://User:pw@example.com/a/c/d?x=1&y=a+b&z=%C3%A4+%26#frag | example.com | /a/c/d | a b"
                     " | xn--mnchen-3ya.de | /%C3%BC | a=1&b=2 | true | TypeError | true | false")


def test_url_classes_are_hardened_against_another_plugin(make_handler, chain):
    tamper = TAMPER % ("[() => { URL.prototype.toString = () => 'hacked'; }, () => { URL.canParse = () => true; },"
                       " () => { URLSearchParams.prototype.get = () => 'hacked'; },"
                       " () => { Object.defineProperty(URL.prototype, 'href', { get: () => 'hacked' }); }]")
    user = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '#' + [String(new URL('https://a.b/c')),\n" \
           " new URLSearchParams('k=v').get('k'), URL.canParse('nope')].join(',');"
    result = chain("systemPrompt", [make_handler(tamper), make_handler(user)], PROMPT_CONTEXT)
    assert result.value == "TypeError,TypeError,TypeError,TypeError#https://a.b/c,v,false"


def test_abort_controller_signals_once_with_its_reason(make_handler, chain):
    value = run_prompt(make_handler, chain, """
  const controller = new AbortController();
  const seen = [];
  controller.signal.addEventListener('abort', (event) => seen.push('listener:' + event.type));
  controller.signal.onabort = () => seen.push('onabort');
  const before = controller.signal.aborted;
  controller.abort('stop');
  controller.abort('again');
  const ready = AbortSignal.abort();
  const any = AbortSignal.any([new AbortController().signal, ready]);
  let thrown = 'no';
  try { controller.signal.throwIfAborted(); } catch (e) { thrown = String(e); }
  return [before, controller.signal.aborted, seen.sort().join('+'), controller.signal.reason, thrown,
          ready.aborted, ready.reason.name, any.aborted, typeof AbortSignal.timeout,
          controller.signal instanceof AbortSignal].join(',');""")
    assert value == "false,true,listener:abort+onabort,stop,stop,true,AbortError,true,undefined,true"
    assert tamper_results(make_handler, chain, "[() => { AbortController.prototype.abort = () => {}; },"
                          " () => { AbortSignal.abort = null; }]") == {"TypeError"}


def test_crypto_random_values_and_uuids(make_handler, chain):
    value = run_prompt(make_handler, chain, """
  const words = new Uint32Array(64);
  const same = crypto.getRandomValues(words) === words;
  const ids = Array.from({ length: 200 }, () => crypto.randomUUID());
  const failures = [new DataView(new ArrayBuffer(8)), [1, 2], new Uint8Array(65537)].map((arg) => {
    try { crypto.getRandomValues(arg); return 'filled'; } catch (e) { return e.name; } });
  const bits = words.reduce((n, w) => n + w.toString(2).split('1').length - 1, 0);
  return JSON.stringify({ same, distinctWords: new Set(words).size, bits, ids, failures });""")
    out = json.loads(value)
    assert out["same"] is True and out["distinctWords"] == 64
    assert 800 < out["bits"] < 1250   # 2048 random bits: about half set (far outside chance otherwise)
    assert len(set(out["ids"])) == 200
    assert all(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", i) for i in out["ids"])
    assert out["failures"] == ["TypeMismatchError", "TypeMismatchError", "QuotaExceededError"]


def test_random_values_differ_between_chains_and_engines(make_handler, chain):
    handler = make_handler("globalThis.middleware.systemPrompt = async (c) => crypto.randomUUID();")
    seen = {chain("systemPrompt", [handler], PROMPT_CONTEXT).value for _ in range(12)}
    assert len(seen) == 12


def test_subtle_digest_matches_the_sha_family(make_handler, chain):
    value = run_prompt(make_handler, chain, """
  const data = new TextEncoder().encode('héllo, plugin');
  const hex = (buffer) => Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, '0')).join('');
  const out = {};
  for (const name of ['SHA-1', 'SHA-256', 'SHA-384', 'SHA-512']) {
    const result = crypto.subtle.digest(name, data);
    out[name] = [result instanceof Promise, (await result) instanceof ArrayBuffer, hex(await result)];
  }
  const view = new DataView(data.buffer, 1, 4);
  out.view = hex(await crypto.subtle.digest({ name: 'sha-256' }, view));
  out.buffer = hex(await crypto.subtle.digest('SHA-256', data.buffer));
  out.refused = await Promise.all([crypto.subtle.digest('MD5', data), crypto.subtle.digest('SHA-256', 'text')]
    .map((p) => p.then(() => 'resolved', (e) => e.name)));
  return JSON.stringify(out);""")
    out = json.loads(value)
    data = "héllo, plugin".encode()
    for name, fn in {"SHA-1": hashlib.sha1, "SHA-256": hashlib.sha256, "SHA-384": hashlib.sha384,
                     "SHA-512": hashlib.sha512}.items():
        assert out[name] == [True, True, fn(data).hexdigest()]
    assert out["view"] == hashlib.sha256(data[1:5]).hexdigest()
    assert out["buffer"] == hashlib.sha256(data).hexdigest()
    assert out["refused"] == ["NotSupportedError", "TypeError"]


def test_digest_reads_a_lying_typed_array_by_its_real_bytes(make_handler, chain):
    value = run_prompt(make_handler, chain, """
  class Liar extends Uint8Array { get byteLength() { return 1; } get buffer() { return new ArrayBuffer(0); } }
  const bytes = new Liar([97, 98, 99]);
  const hex = (buffer) => Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, '0')).join('');
  return hex(await crypto.subtle.digest('SHA-256', bytes));""")
    assert value == hashlib.sha256(b"abc").hexdigest()


def test_crypto_is_hardened_against_another_plugin(make_handler, chain):
    tamper = TAMPER % ("[() => { crypto.randomUUID = () => 'fixed'; }, () => { crypto.getRandomValues = (a) => a; },"
                       " () => { crypto.subtle.digest = async () => new ArrayBuffer(0); }, () => { crypto.extra = 1; }]")
    user = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '#' + [crypto.randomUUID().length,\n" \
           " (await crypto.subtle.digest('SHA-1', new Uint8Array(0))).byteLength, typeof crypto.extra].join(',');"
    result = chain("systemPrompt", [make_handler(tamper), make_handler(user)], PROMPT_CONTEXT)
    assert result.value == "TypeError,TypeError,TypeError,TypeError#36,20,undefined"

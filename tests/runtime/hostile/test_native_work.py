"""Native work V8 cannot interrupt is bounded per call (issue 39, item 3): a sort too large to run
natively gets a comparator (each comparison a point where the CPU budget stops it), a string scan or
build too large is refused, and Intl objects are counted per invocation. The handler is stopped or
refused within its budget, the engine's isolate lives on, and an account calling beside it is served."""

import threading

import pytest

from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import Handler, run_chain

from ..conftest import PROMPT_CONTEXT

WALL_MS = 30_000   # never reached: the CPU budget or a guard must end every attack first
CPU_MS = 400
ATTACKS = {
    # The attack: 64 Mi elements sorted natively held V8 for 8.5 s after termination.
    "typed array sort": ("""globalThis.middleware.systemPrompt = async (c) => {
  const a = new Uint32Array(32 * 1024 * 1024);
  for (let i = 0; i < a.length; i += 4099) a[i] = (i * 2654435761) >>> 0;
  a.sort(); return c.systemPrompt + ' sorted'; };""", "timeout", "ms of CPU"),
    "typed array toSorted": ("""globalThis.middleware.systemPrompt = async (c) => {
  const a = new Int32Array(32 * 1024 * 1024);
  for (let i = 0; i < a.length; i += 4099) a[i] = -i;
  a.toSorted(); return c.systemPrompt + ' sorted'; };""", "timeout", "ms of CPU"),
    # The default Array order compares as strings: 4 Mi numbers held V8 for 30 s natively.
    "array sort": ("""globalThis.middleware.systemPrompt = async (c) => {
  const a = Array.from({ length: 2 * 1024 * 1024 }, (_, i) => (i * 2654435761) % 1000003);
  a.sort(); return c.systemPrompt + ' sorted'; };""", "timeout", "ms of CPU"),
    "replaceAll": ("""globalThis.middleware.systemPrompt = async (c) => {
  const s = 'a'.repeat(16 * 1024 * 1024); s.replaceAll('a', 'bb'); return c.systemPrompt; };""",
                   "error", "String.prototype.replaceAll: 16777216 characters is over the 1048576"),
    "split": ("""globalThis.middleware.systemPrompt = async (c) => {
  let s = 'ab'; for (let i = 0; i < 22; i++) s = s + s; s.split(''); return c.systemPrompt; };""",
              "error", "String.prototype.split: 8388608 characters"),
    "repeat": ("""globalThis.middleware.systemPrompt = async (c) => 'x'.repeat(2 ** 28);""",
               "error", "String.prototype.repeat: 268435456 characters is over the 16777216"),
    "padStart": ("""globalThis.middleware.systemPrompt = async (c) => ''.padStart(2 ** 28, 'xy');""",
                 "error", "String.prototype.padStart"),
    # Issue 39 item 2's bomb: 44 objects, 4 Mi paths, written out in one native call.
    # ICU's normalization of 32 Mi decomposed units held V8 25 s after termination.
    "normalize": ("""globalThis.middleware.systemPrompt = async (c) => {
  let s = 'e\\u0301'; for (let i = 0; i < 23; i++) s = s + s; return s.normalize('NFC').length + ''; };""",
                  "error", "String.prototype.normalize: 16777216 characters is over the 1048576"),
    "localeCompare": ("""globalThis.middleware.systemPrompt = async (c) => {
  let s = 'a'; for (let i = 0; i < 22; i++) s = s + s; for (;;) s.localeCompare(s + 'b'); };""",
                      "error", "String.prototype.localeCompare: 4194305 characters"),
    "Intl.Collator compare": ("""globalThis.middleware.systemPrompt = async (c) => {
  let s = 'a'; for (let i = 0; i < 22; i++) s = s + s; const { compare } = new Intl.Collator('fr');
  for (;;) compare(s, s + 'b'); };""", "error", "Intl.Collator compare: 4194305 characters"),
    # 512 MiB written by one native call (its pages faulted in as it goes) held V8 over a second.
    "typed array fill": ("""globalThis.middleware.systemPrompt = async (c) => {
  const a = new Float64Array(64 * 1024 * 1024); for (;;) a.fill(Math.random()); };""", "timeout", "ms of CPU"),
    "JSON bomb": ("""globalThis.middleware.systemPrompt = async (c) => {
  let o = [c]; for (let i = 0; i < 22; i++) o = [o, o]; JSON.parse(JSON.stringify(o)); return c.systemPrompt; };""",
                  "error", "JSON.stringify: the value has over 262144 objects"),
    "Intl objects": ("""globalThis.middleware.systemPrompt = async (c) => {
  for (;;) new Intl.NumberFormat('en', { style: 'currency', currency: 'EUR' }); };""",
                     "error", "over 1000 Intl objects in one invocation"),
    "Intl through an instance's constructor": ("""globalThis.middleware.systemPrompt = async (c) => {
  const F = Object.getPrototypeOf(new Intl.DateTimeFormat()).constructor;
  for (;;) new F('en'); };""", "error", "Intl.DateTimeFormat: over 1000"),
}
VICTIM = """let calls = 0;
globalThis.middleware.systemPrompt = async (c) => `${c.systemPrompt} victim ${++calls}`;"""


def handler(tier, source, n):
    compiled = tier.compile(source, "javascript")
    assert not compiled["errors"], compiled["errors"]
    return Handler(str(n), f"plugin-{n}", f"hash-{n}", compiled["code"], {})


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_native_work_is_bounded_and_the_engine_lives(one_engine, attack):
    _supervisor, tier = one_engine
    source, status, words = ATTACKS[attack]
    spec = HOOKS["systemPrompt"]
    bad, victim = handler(tier, source, 1), handler(tier, VICTIM, 2)
    good = handler(tier, "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' +good';", 3)
    assert run_chain(tier, "victim", spec, [victim], PROMPT_CONTEXT).value == "base victim 1"
    replaced = tier.ping(tier.engines[0])["replaced"]
    victims: list = []
    stop = threading.Event()

    def call_victim():
        while not stop.is_set():
            victims.append(run_chain(tier, "victim", spec, [victim], PROMPT_CONTEXT))
        tier.shutdown()   # this thread's links

    caller = threading.Thread(target=call_victim)
    caller.start()
    try:
        result = run_chain(tier, "tenant", spec, [bad, good], PROMPT_CONTEXT, budget_ms=WALL_MS, cpu_ms=CPU_MS)
    finally:
        stop.set()
        caller.join()
    attacked, after = result.trace
    assert attacked.status == status, attacked.warning
    assert words in (attacked.warning or ""), attacked.warning
    # Code that never yields is stopped in its turn ("wedged", a strike), never by losing the isolate.
    assert attacked.crash in (None, "wedged"), attacked.warning
    assert (after.status, result.value) == ("ran", "base +good")  # fail-open: the chain went on
    # The isolate was never replaced: the victim's module state went on counting, every call ran.
    assert tier.ping(tier.engines[0])["replaced"] == replaced
    assert victims and all(v.trace[0].status == "ran" and v.trace[0].state_reset is None for v in victims)
    last = run_chain(tier, "victim", spec, [victim], PROMPT_CONTEXT).value
    assert last == f"base victim {len(victims) + 2}"


def test_ordinary_sorts_strings_and_intl_behave_as_before(make_handler, chain):
    code = """globalThis.middleware.systemPrompt = async (c) => JSON.stringify([
  [10, 9, 1, undefined, 2].sort(),
  Array.from(new Int32Array([3, 0, -7, 1]).sort()),
  Array.from(new Int8Array([3, -2, 1]).toSorted()),
  [3, 1, 2].toSorted((a, b) => b - a),
  'ab'.repeat(3), '7'.padStart(3, '0'), 'a-b-c'.replaceAll('-', '+'), 'a,b'.split(','),
  new Intl.NumberFormat('en-US', { style: 'currency', currency: 'EUR' }).format(1.5),
  Intl.NumberFormat('en-US').format(1234),
  new Intl.NumberFormat('en') instanceof Intl.NumberFormat,
  Object.getPrototypeOf(new Intl.Collator()).constructor === Intl.Collator,
  Intl.DateTimeFormat.supportedLocalesOf(['en']).length,
  Array.prototype.sort.name, String.prototype.replace.length,
  ['b', 'a', 'é'].sort((x, y) => x.localeCompare(y, 'fr')), 'e\\u0301'.normalize('NFC').length,
  new Intl.Collator('en').compare('a', 'b'), (() => { const k = new Intl.Collator('en'); return k.compare === k.compare; })(),
  Array.from(new Int16Array(3).fill(7, 1)), Uint8Array.prototype.fill.name,
  Array.from(new Float64Array([0.5, 2]).fill(1.25, 1)), new Float32Array([0.1])[0] !== 0.1,
]);"""
    result = chain("systemPrompt", [make_handler(code)], PROMPT_CONTEXT)
    assert result.trace[0].status == "ran", result.trace[0].warning
    assert result.value == ('[[1,10,2,9,null],[-7,0,1,3],[-2,1,3],[3,2,1],"ababab","007","a+b+c",'
                            '["a","b"],"€1.50","1,234",true,true,1,"sort",2,["a","b","é"],1,-1,true,[0,7,7],"fill",[0.5,1.25],true]')


def test_a_fill_past_the_slice_bound_stores_what_the_native_fill_stores(make_handler, chain):
    # Sliced past TYPED_FILL_SLICE elements: the value converted once (its valueOf runs once), start and
    # end read as the native fill reads them, every kind's own conversion (clamping, wrapping, BigInt).
    code = """globalThis.middleware.systemPrompt = async (c) => {
  const n = (1 << 22) * 2 + 5;
  let reads = 0; const v = { valueOf() { reads++; return 300.7; } };
  const clamped = new Uint8ClampedArray(n).fill(v, 3, -2);
  const wrapped = new Int8Array(n).fill(200, -7);
  const big = new BigInt64Array(n).fill(2n ** 63n + 5n, 1);
  const same = clamped.fill(v, n) === clamped;
  const edges = [clamped[2], clamped[3], clamped[n - 3], clamped[n - 2], wrapped[n - 8], wrapped[n - 7],
                 String(big[0]), String(big[n - 1]), reads, same];
  let bad = 'none'; try { new Float64Array(n).fill(1n); } catch (e) { bad = e.constructor.name; }
  return JSON.stringify([...edges, bad]);
};"""
    result = chain("systemPrompt", [make_handler(code)], PROMPT_CONTEXT, cpu_ms=10_000, budget_ms=30_000)
    assert result.trace[0].status == "ran", result.trace[0].warning
    assert result.value == '[0,255,255,0,0,-56,"0","-9223372036854775803",2,true,"TypeError"]'


def test_a_large_sort_past_the_native_bound_still_orders_as_the_default(make_handler, chain):
    # Past the native bound the comparator path runs: it must give the default orders exactly.
    code = """globalThis.middleware.systemPrompt = async (c) => {
  const n = (1 << 16) + 3;
  const a = Array.from({ length: n }, (_, i) => (i * 7919) % 1000);
  a[5] = undefined;
  const sorted = a.sort();
  const strings = sorted.slice(0, -1).map(String);
  const ok = strings.every((s, i) => i === 0 || strings[i - 1] <= s) && sorted[n - 1] === undefined;
  return `${c.systemPrompt} ${ok} ${sorted.length}`;
};"""
    result = chain("systemPrompt", [make_handler(code)], PROMPT_CONTEXT, cpu_ms=10_000, budget_ms=30_000)
    assert (result.trace[0].status, result.value) == ("ran", f"base true {(1 << 16) + 3}")


def test_stringify_counts_shared_parts_once_per_path_and_lets_cycles_fail_as_before(make_handler, chain):
    # [o, o] nested k deep around [c] has 3 * 2^k - 1 objects along its paths: 196,607 at k = 16 (under
    # the bound, written in full), 393,215 at k = 17 (refused before V8 writes it). A cycle is
    # stringify's own TypeError, as without the guard.
    code = """globalThis.middleware.systemPrompt = async (c) => {
  const nest = (k) => { let o = [{ t: c.systemPrompt }]; for (let i = 0; i < k; i++) o = [o, o]; return o; };
  const written = JSON.stringify(nest(16)).length;
  let refused = '';
  try { JSON.stringify(nest(17)); } catch (e) { refused = e.constructor.name + ': ' + e.message.slice(0, 40); }
  const loop = { a: [1] }; loop.a.push(loop);
  let cycle = '';
  try { JSON.stringify(loop); } catch (e) { cycle = e.constructor.name; }
  return [written, refused, cycle].join(' | ');
};"""
    result = chain("systemPrompt", [make_handler(code)], PROMPT_CONTEXT)
    assert result.trace[0].status == "ran", result.trace[0].warning
    length = len('[{"t":"base"}]')
    for _ in range(16):
        length = 2 * length + 3   # "[" + inner + "," + inner + "]"
    assert result.value == f"{length} | RangeError: JSON.stringify: the value has over 26214 | TypeError"

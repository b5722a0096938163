"""Bundled code the way libraries write it: SES-suspect text in literals, and the global object's names."""

from pathlib import Path

import pytest

from .conftest import INBOUND_CONTEXT, PROMPT_CONTEXT

SUSPECT_LITERALS = r"""
const re = /<!--([\s\S]*?)-->/;          // a comment with <!-- and --> and import(x)
/* import(y) and --> */
const s = "import('m') <!-- \<!-- -->";
const t = `a${1}<!--${2}-->import (z)`;
globalThis.middleware.userMessageInbound = async (c) =>
  [re.exec("x<!--hidden-->y")[1], s, t, s.length, re.test("<!-- -->")].join("|");
"""


@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_html_comment_and_import_text_in_literals_and_comments_keeps_its_meaning(language, make_handler, chain):
    handler = make_handler(SUSPECT_LITERALS, language=language)
    result = chain("userMessageInbound", [handler], INBOUND_CONTEXT)
    assert result.trace[0].status == "ran", result.trace[0].warning
    assert result.value == "hidden|import('m') <!-- <!-- -->|a1<!--2-->import (z)|25|true"


@pytest.mark.parametrize("source, line, column, words", [
    ("const a = 1;\nconst b = a <!--b;\nglobalThis.middleware.systemPrompt = (c) => c.systemPrompt;", 2, 13, "<!--"),
    ("globalThis.middleware.systemPrompt = async (c) => {\n  const m = await import('fs');\n  return c.systemPrompt;\n};",
     2, 19, "dynamic import()"),
    ("import fs from 'fs';\nglobalThis.middleware.systemPrompt = (c) => c.systemPrompt;", 1, 1, "import and export"),
])
def test_html_comments_and_imports_in_code_are_refused_with_line_and_column(source, line, column, words, pool):
    errors = pool.compile(source, "javascript")["errors"]
    assert errors and words in errors[0]["message"]
    assert (errors[0]["line"], errors[0]["column"]) == (line, column)


def test_self_and_global_are_the_compartments_own_global_object(make_handler, chain):
    writer = make_handler("self.mine = 'a'; global.also = 'b';\n"
                          "globalThis.middleware.systemPrompt = async (c) => [self === globalThis, global === globalThis,"
                          " globalThis.mine, globalThis.also].join(',');")
    reader = make_handler("globalThis.middleware.userMessageInbound = async (c) => [typeof self.mine, typeof global.also,"
                          " self === globalThis, Function('return this')() === undefined].join(',');")
    assert chain("systemPrompt", [writer], PROMPT_CONTEXT).value == "true,true,a,b"
    assert chain("userMessageInbound", [reader], INBOUND_CONTEXT).value == "undefined,undefined,true,true"


def test_intl_works_with_time_zones_and_is_hardened(make_handler, chain):
    tamper = make_handler("""
globalThis.middleware.systemPrompt = async (c) => {
  const tries = [() => { Intl.DateTimeFormat.prototype.format = () => 'hacked'; },
                 () => { Intl.Hacked = 1; }, () => { Intl.NumberFormat = null; }];
  return tries.map((f) => { try { f(); return 'changed'; } catch (e) { return e.constructor.name; } }).join(',');
};""")
    user = make_handler("""
globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '#' + [
  new Intl.DateTimeFormat('en-US', { timeZone: 'Asia/Tokyo', hour: 'numeric', hour12: false }).format(new Date(0)),
  new Intl.NumberFormat('de-DE').format(1234567.5),
  ['b', 'a', 'C'].sort(new Intl.Collator('en').compare).join(''),
  [...new Intl.Segmenter('en', { granularity: 'word' }).segment('Hi there')].filter((s) => s.isWordLike).length,
].join('|');""")
    result = chain("systemPrompt", [tamper, user], PROMPT_CONTEXT)
    assert result.trace[0].status == "ran"
    assert result.trace[1].status == "ran"
    assert result.value == "TypeError,TypeError,TypeError#09|1.234.567,5|abC|2"


def test_queue_microtask_runs_within_the_handler(make_handler, chain):
    handler = make_handler("""
globalThis.middleware.systemPrompt = async (c) => {
  const order = [];
  queueMicrotask(() => order.push('micro'));
  order.push('sync');
  await null; await null;
  let refused = 'no';
  try { queueMicrotask('not a function'); } catch (e) { refused = e.constructor.name; }
  return order.join(',') + '|' + refused;
};""")
    assert chain("systemPrompt", [handler], PROMPT_CONTEXT).value == "sync,micro|TypeError"


def test_text_encoding_and_base64_polyfills_work_inside_a_plugin(make_handler, chain):
    handler = make_handler("""
globalThis.middleware.systemPrompt = async (c) => {
  const bytes = new TextEncoder().encode('café €');
  let refused = 'no';
  try { btoa('€'); } catch (e) { refused = 'yes'; }
  return [Array.from(bytes).join(' '), new TextDecoder().decode(bytes), btoa('hi there'), atob('aGkgdGhlcmU='),
    refused].join('|');
};""")
    assert chain("systemPrompt", [handler], PROMPT_CONTEXT).value == (
        "99 97 102 195 169 32 226 130 172|café €|aGkgdGhlcmU=|hi there|yes")


def test_polyfilled_globals_are_hardened_against_another_plugin(make_handler, chain):
    tamper = make_handler("""
globalThis.middleware.systemPrompt = async (c) => [
  () => { TextEncoder.prototype.encode = () => new Uint8Array([1]); },
  () => { TextDecoder.prototype.decode = () => 'hacked'; },
  () => { btoa.call = null; },
  () => { Object.defineProperty(atob, 'x', { value: 1 }); },
].map((f) => { try { f(); return 'changed'; } catch (e) { return e.constructor.name; } }).join(',');""")
    user = make_handler("""
globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '#' +
  [new TextDecoder().decode(new TextEncoder().encode('ok')), btoa('a'), typeof atob.x].join(',');""")
    result = chain("systemPrompt", [tamper, user], PROMPT_CONTEXT)
    assert result.value == "TypeError,TypeError,TypeError,TypeError#ok,YQ==,undefined"


TIMERS = """
globalThis.middleware.systemPrompt = async (c) => {
  const order = [];
  const cleared = setTimeout(() => order.push('cleared one ran'), 5);
  clearTimeout(cleared);
  await new Promise((resolve) => setTimeout((a, b) => { order.push(a + b); resolve(); }, 20, 'wo', 'ke'));
  return order.join(',');
};
"""


def test_timers_fire_within_the_invocation_and_never_after_it(make_handler, chain):
    plugin = make_handler(TIMERS)
    account = "acct-timers"
    assert chain("systemPrompt", [plugin], PROMPT_CONTEXT, account=account).value == "woke"
    # A timer still pending when its handler returns is cleared: the same compartment's next
    # invocation waits past it and finds it never ran.
    quick = make_handler("""
globalThis.middleware.systemPrompt = async (c) => { setTimeout(() => { globalThis.late = 1; }, 5); return 'x'; };
globalThis.middleware.userMessageInbound = async (c) => {
  await new Promise((resolve) => setTimeout(resolve, 60));
  return String(globalThis.late);
};""")
    assert chain("systemPrompt", [quick], PROMPT_CONTEXT, account=account).value == "x"
    assert chain("userMessageInbound", [quick], INBOUND_CONTEXT, account=account).value == "undefined"


def test_a_timer_set_at_load_time_is_refused(pool):
    errors = pool.compile("setTimeout(() => {}, 1);\nglobalThis.middleware.systemPrompt = (c) => c.systemPrompt;",
                          "javascript")["errors"]
    assert errors and "only inside a handler's invocation" in errors[0]["message"]


WITH_SOURCE = "const a = 1;\nfunction f(o) {\n  with (o) { return a; }\n}\nglobalThis.middleware.systemPrompt = (c) => c.systemPrompt;"


@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_a_with_statement_is_named_where_it_stands_with_the_way_round_it(language, pool):
    # Issue 33: SES refused the whole source "at line 1, column 1" without saying why.
    errors = pool.compile(WITH_SOURCE, language)["errors"]
    assert errors and (errors[0]["line"], errors[0]["column"]) == (3, 3)
    assert "`with` statement" in errors[0]["message"] and "variable" in errors[0]["message"]


def test_lodash_template_without_a_variable_says_what_to_do(make_handler, chain):
    # lodash's _.template builds its function with `with` unless given a variable name (the bundle's
    # other calls use one); the warning names the construct and the way round it.
    lodash = (Path(__file__).parent / "compat" / "bundles" / "lodash.js").read_text()
    handler = make_handler(lodash, slug="lodash")
    trace = chain("userMessageInbound", [handler], dict(INBOUND_CONTEXT, text="template without variable")).trace[0]
    assert trace.status == "error"
    assert "`with` statement" in trace.warning and "_.template(text, { variable: 'data' })" in trace.warning


def test_a_with_built_at_load_time_is_explained_too(pool):
    errors = pool.compile("Function('o', 'with (o) { return 1; }');\n"
                          "globalThis.middleware.systemPrompt = (c) => c.systemPrompt;", "javascript")["errors"]
    assert errors and "{ variable: 'data' }" in errors[0]["message"]

"""The one host member table (runtime/tables/members.py) against the harness's real host object, the host
plan, the permissions and the SDK declarations generated from it."""

import asyncio
import json
import re

import pytest

from plugins_app.runtime.engine import isolate as isolate_module
from plugins_app.runtime.engine.isolate import Isolate
from plugins_app.runtime.protocol import Limits
from plugins_app.runtime.tables.context import sample_context
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.tables.members import (
    ARG_KINDS,
    HOST_MEMBERS,
    OFFER_BY_TOP,
    RESULT_KINDS,
    UNCHARGED_MEMBERS,
    HostMember,
)
from plugins_app.runtime.tables.permissions import ALL_PERMISSIONS, permission_for
from plugins_app.runtime.tables.sdk_types import middleware_d_ts
from plugins_app.runtime.web.chain import SESSION_HOP_LIMIT, host_plan

# A handler that describes the real host object it gets, in one log line: each path's kind (a function
# and its name, config, or a value) and whether each object on the way is frozen.
DESCRIBE = """
  const out = { paths: {}, frozen: {} };
  const walk = (o, prefix) => {
    out.frozen[prefix] = Object.isFrozen(o);
    for (const k of Object.keys(o)) {
      const v = o[k]; const p = prefix ? prefix + '.' + k : k;
      if (p === 'config') out.paths[p] = ['config', v];
      else if (typeof v === 'function') out.paths[p] = ['function', v.name];
      else if (v !== null && typeof v === 'object') walk(v, p);
      else out.paths[p] = ['value', v];
    }
  };
  walk(host, '');
  host.log('info', JSON.stringify(out));
"""
CONFIG = {"threshold": 3, "names": ["a"]}


def describer_source() -> str:
    """One plugin handling every hook, each handler passing its value through unchanged."""
    handlers = []
    for spec in HOOKS.values():
        mutable = [f.name for f in spec.mutable_fields()]
        result = f"c.{mutable[0]}" if len(mutable) == 1 else "({})"
        handlers.append(f"globalThis.middleware.{spec.name} = (c) => {{{DESCRIBE}  return {result};\n}};")
    return "\n".join(handlers)


def expected_host(spec, plan) -> dict:
    """What the table says the host object of an invocation with this host plan holds."""
    paths = {}
    for m in HOST_MEMBERS:
        if m.offered != "always" and not plan[m.offered]:
            continue
        leaf = m.name.rpartition(".")[2]
        paths[m.name] = {"bridge": ["function", leaf], "log": ["function", leaf], "config": ["config", CONFIG],
                         "plan": ["value", plan[m.offered][leaf] if m.answered == "plan" else None]}[m.answered]
    return paths


@pytest.mark.parametrize("hook, hop", [(name, 0) for name in HOOKS] + [("sshCommandSending", SESSION_HOP_LIMIT + 1)],
                         ids=lambda v: str(v))
def test_the_real_host_object_is_built_from_the_table(make_handler, chain, hook, hop):
    spec = HOOKS[hook]
    context = sample_context(spec)
    result = chain(hook, [make_handler(describer_source(), config=CONFIG)], context, hop=hop)
    (trace,) = result.trace
    assert trace.status == "ran", trace.warning
    described = json.loads(trace.logs[0]["message"])
    plan = host_plan(spec, context, hop)
    assert described["paths"] == expected_host(spec, plan)
    # Nested objects come from the dotted names, and every one of them is hardened.
    groups = {""} | {m.name.rsplit(".", i)[0] for m in HOST_MEMBERS for i in range(1, m.name.count(".") + 1)}
    assert set(described["frozen"]) == {g for g in groups if g == "" or any(
        p.startswith(g + ".") for p in described["paths"])}
    assert all(described["frozen"].values()), described["frozen"]


def test_the_session_group_is_left_out_past_the_hop_limit_and_kept_up_to_it():
    spec = HOOKS["sshCommandSending"]
    assert host_plan(spec, sample_context(spec), SESSION_HOP_LIMIT)["session"]
    assert not host_plan(spec, sample_context(spec), SESSION_HOP_LIMIT + 1)["session"]


# How each argument kind is read, for real: a JavaScript argument (or, for "...json", the arguments
# from there on) and what Python receives. Each kind's samples tell it apart from the others.
ARG_SAMPLES = {
    "string": [("{ toString() { return 'S'; } }", "S"), ("undefined", "undefined"),
               ("{ toString() { throw new Error('no'); } }", "[unprintable value]")],
    "optionalString": [("undefined", ""), ("7", "7"), ("null", "null")],
    "optionalJson": [("undefined", None), ("{ a: 1, f() {}, d: new Date(0) }", {"a": 1, "d": "1970-01-01T00:00:00.000Z"}),
                     ("null", None)],
    "jsonList": [("undefined", []), ("null", []), ("['x', undefined, () => 1]", ["x", None, None])],
    "...json": [("'p', undefined, { a: [1, undefined] }", ["p", None, {"a": [1, None]}]), ("", []),
                ("{ messages: [] }", [{"messages": []}])],
}
ANSWERS = {"response": {"status": 201, "headers": {"x-a": "b"}, "body": '{"n": 1}'}, "plain": {"files": ["f"]}}
BRIDGED = [m for m in HOST_MEMBERS if m.bridged]


def call_source(m: HostMember, variant: int) -> tuple[str, list]:
    js, expected = [], []
    for kind in m.args:
        sample, value = ARG_SAMPLES[kind][variant % len(ARG_SAMPLES[kind])]
        if kind == "...json":
            js += [sample] if sample else []
            expected += value
        else:
            js.append(sample)
            expected.append(value)
    return f"host.{m.name}({', '.join(js)})", expected


def test_the_vocabulary_has_samples_for_every_kind():
    assert set(ARG_SAMPLES) == set(ARG_KINDS) and set(ANSWERS) == set(RESULT_KINDS)


def test_each_bridged_stub_reads_its_arguments_and_wraps_its_answer_as_the_table_says(make_handler, chain):
    calls, expected, lines = [], [], []
    for m in BRIDGED:
        for variant in range(3):
            source, args = call_source(m, variant)
            expected.append((m.name, args))
            lines.append(f"  host.log('info', JSON.stringify([{json.dumps(m.name)}, await describe(await {source})]));")
    plugin = make_handler("""
const describe = async (r) => Object.isFrozen(r) && typeof r.text === 'function'
  ? { status: r.status, ok: r.ok, headers: r.headers, text: await r.text(), json: await r.json(), frozen: true }
  : { plain: r, frozen: Object.isFrozen(r) };
globalThis.middleware.sshCommandSending = async (c) => {
""" + "\n".join(lines) + """
  return {};
};""")

    def host(handler, name, args):
        calls.append((name, args))
        return ANSWERS[next(m.result for m in BRIDGED if m.name == name)]

    context = sample_context(HOOKS["sshCommandSending"])
    result = chain("sshCommandSending", [plugin], context, host=host, budget_ms=5000)
    (trace,) = result.trace
    assert trace.status == "ran", trace.warning
    assert calls == expected, trace.logs
    wrapped = {"response": {"status": 201, "ok": True, "headers": {"x-a": "b"}, "text": '{"n": 1}',
                            "json": {"n": 1}, "frozen": True},
               "plain": {"plain": {"files": ["f"]}, "frozen": False}}
    assert [json.loads(line["message"]) for line in trace.logs] == [
        [name, wrapped[next(m.result for m in BRIDGED if m.name == name)]] for name, _ in expected]


@pytest.mark.parametrize("change, refusal", [
    ({"args": ["bogusKind"]}, "host.fetch: no reader for argument kind bogusKind"),
    ({"result": "stream"}, "host.fetch: no wrapper for result kind stream"),
    ({"answered": "telepathy"}, "host.fetch: no way to answer telepathy"),
], ids=["argument", "result", "answered"])
def test_an_isolate_refuses_a_table_the_harness_cannot_build(monkeypatch, change, refusal):
    table = json.loads(isolate_module.harness_members_json())
    table[[m["name"] for m in table].index("fetch")].update(change)
    monkeypatch.setattr(isolate_module, "harness_members_json", lambda: json.dumps(table))

    async def start():
        iso = Isolate(256, Limits())
        try:
            await iso.start()
        finally:
            await iso.close()

    with pytest.raises(Exception, match=refusal):
        asyncio.run(start())


def test_the_host_plan_offers_a_member_on_exactly_the_hooks_the_table_names():
    for m in HOST_MEMBERS:
        if m.offered == "always":
            assert m.hooks() == tuple(HOOKS)
            continue
        offered = tuple(name for name, spec in HOOKS.items()
                        if host_plan(spec, sample_context(spec))[m.offered])
        assert offered == m.hooks(), m.name


def test_permissions_and_budget_come_from_the_table():
    for m in HOST_MEMBERS:
        assert permission_for(m.name) == m.permission
    assert set(ALL_PERMISSIONS) == {m.permission for m in HOST_MEMBERS if m.permission}
    assert UNCHARGED_MEMBERS == {"ssh.command"}


def _host_interfaces() -> dict[str, str]:
    return dict(re.findall(r"^interface (Host\w*) \{\n(.*?)\n\}", middleware_d_ts(), re.M | re.S))


def _interface_of(path: str) -> str:
    return "Host" + "".join(part[0].upper() + part[1:] for part in path.split(".") if part)


def test_the_sdk_declares_exactly_the_tables_members_in_their_parents_interfaces():
    interfaces = _host_interfaces()
    declared = {(name, line.strip().rstrip(";")) for name, body in interfaces.items() for line in body.splitlines()
                if not line.strip().startswith("/**") and not re.fullmatch(r"\s*readonly \w+\??: Host\w*;", line)}
    assert declared == {(_interface_of(m.name.rpartition(".")[0]), m.signature) for m in HOST_MEMBERS}
    for m in HOST_MEMBERS:   # each with its doc just above it
        assert f"  /** {m.doc} */\n  {m.signature};" in interfaces[_interface_of(m.name.rpartition(".")[0])]


def test_the_sdk_nests_the_groups_and_marks_the_offered_ones_optional():
    interfaces = _host_interfaces()
    nested = {(parent, child, optional, target) for parent, body in interfaces.items()
              for child, optional, target in re.findall(r"^  readonly (\w+)(\??): (Host\w*);$", body, re.M)}
    groups = {m.name.rsplit(".", i)[0] for m in HOST_MEMBERS for i in range(1, m.name.count(".") + 1)}
    assert nested == {(_interface_of(g.rpartition(".")[0]), g.rpartition(".")[2],
                       "?" if "." not in g and OFFER_BY_TOP[g] != "always" else "", _interface_of(g)) for g in groups}
    for top, offer in OFFER_BY_TOP.items():   # an optional group's doc names the hooks that get it
        if offer != "always":
            hooks = next(m for m in HOST_MEMBERS if m.top == top).hooks()
            assert f"{', '.join(hooks)}. */\n  readonly {top}?:" in interfaces["Host"]


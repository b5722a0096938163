"""Run-time failures at the author's line: a thrown error, a timeout and a malformed result carry
`at` (line and column of the TypeScript or JavaScript source) and say it in the warning."""

from plugins_app.runtime import positions

from .conftest import PROMPT_CONTEXT

TS = """interface Shout {
  level: number;
}

const shout: Shout = { level: 2 };

function loud(text: string, s: Shout): string {
  const parts: string[] = text.split(" ");
  return (parts as any).nope.join("!") + s.level;
}

globalThis.middleware.systemPrompt = async (c) => {
  return loud(c.systemPrompt, shout);
};
"""


def column_of(source: str, line: int, needle: str) -> int:
    return source.splitlines()[line - 1].index(needle) + 1


def test_a_thrown_error_in_typescript_is_at_its_ts_line(make_handler, chain):
    handler = make_handler(TS, language="typescript")
    trace = chain("systemPrompt", [handler], PROMPT_CONTEXT).trace[0]
    assert trace.status == "error"
    # Line 9 of the .ts file; the transpiled code has no interface, so its own line is a different one.
    assert trace.at == {"line": 9, "column": column_of(TS, 9, "join")}
    assert trace.warning.endswith(f"(at line 9, column {column_of(TS, 9, 'join')})")


def test_a_thrown_error_in_javascript_is_at_its_line(make_handler, chain):
    source = "\n\nglobalThis.middleware.systemPrompt = async (c) => {\n  await null;\n  throw new Error('late');\n};\n"
    trace = chain("systemPrompt", [make_handler(source)], PROMPT_CONTEXT).trace[0]
    assert trace.at == {"line": 5, "column": column_of(source, 5, "new Error")}
    assert "Error: late (at line 5" in trace.warning


def test_a_malformed_result_points_at_its_handler(make_handler, chain):
    source = "// returns a number\n\nglobalThis.middleware.systemPrompt = async (c: any) => 42;\n"
    trace = chain("systemPrompt", [make_handler(source, language="typescript")], PROMPT_CONTEXT).trace[0]
    assert trace.status == "malformed"
    assert trace.at == {"line": 3, "column": column_of(source, 3, "async"), "handler": True}
    assert trace.warning.endswith(f"(handler at line 3, column {column_of(source, 3, 'async')})")


def test_a_timeout_points_at_its_handler(make_handler, chain):
    source = "const never = () => new Promise(() => {});\nglobalThis.middleware['systemPrompt'] = async () => never();\n"
    trace = chain("systemPrompt", [make_handler(source)], PROMPT_CONTEXT, budget_ms=200).trace[0]
    assert trace.status == "timeout"
    assert trace.at == {"line": 2, "column": column_of(source, 2, "async"), "handler": True}


def test_a_hostile_stack_is_not_trusted_beyond_its_own_handler(make_handler, chain):
    source = ("globalThis.middleware.systemPrompt = async () => { throw { get stack() { throw 1; }, "
              "message: 'm', name: 'E' }; };")
    trace = chain("systemPrompt", [make_handler(source)], PROMPT_CONTEXT).trace[0]
    assert trace.status == "error" and trace.at == {"line": 1, "column": column_of(source, 1, "async"),
                                                    "handler": True}


def test_code_without_a_map_has_no_position():
    assert positions.locate("h-none", "globalThis.middleware.x = 1;", "x", "error", {"line": 1, "column": 1}) is None


def test_the_vlq_decoder_follows_the_source_map_spec():
    # "AAAA": column 0 of line 1 is line 0, column 0; ";AACA": line 2 starts at source line +1; "IAAI":
    # 4 columns on (I = 8, its low bit the sign), source column +4; "gBAAgB": +16 and +16 (a continued digit).
    mapped = positions.parse({"version": 3, "sources": ["plugin.ts"], "mappings": "AAAA;AACA,IAAI,gBAAgB",
                              "x_hub_hooks": {"systemPrompt": {"line": 3, "column": 4}}})
    assert mapped.original(1, 1) == {"line": 1, "column": 1}
    assert mapped.original(2, 3) == {"line": 2, "column": 1}
    assert mapped.original(2, 5) == {"line": 2, "column": 5}
    assert mapped.original(2, 30) == {"line": 2, "column": 21}
    assert mapped.original(3, 1) is None
    assert mapped.hooks == {"systemPrompt": (3, 4)}


def test_top_level_code_that_throws_at_install_is_refused_at_its_ts_line(pool):
    source = ("interface A { x: number }\n\ntype B = string;\nconst a: A = { x: 1 };\n"
              "if (a.x === 1) { throw new Error('top'); }\n"
              "globalThis.middleware.systemPrompt = async (c: any) => c.systemPrompt;\n")
    errors = pool.compile(source, "typescript")["errors"]
    assert errors == [{"message": "Error: top", "line": 5, "column": column_of(source, 5, "new Error")}]


def test_top_level_javascript_that_throws_is_refused_at_its_line(pool):
    source = "\n\nnull.x;\nglobalThis.middleware.systemPrompt = async (c) => c.systemPrompt;"
    error = pool.compile(source, "javascript")["errors"][0]
    assert (error["line"], error["column"]) == (3, column_of(source, 3, ".x") + 1)
    assert error["message"].startswith("TypeError: Cannot read properties of null")

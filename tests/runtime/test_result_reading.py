"""A handler's result is read once into plain copies: nothing the plugin controls runs after the check."""

import pytest

TODO = {"sessionId": "1", "texts": ["one"]}

HOSTILE = {
    "species and toJSON": """
        class Evil extends Array {
          static get [Symbol.species]() { return function () { return { toJSON() { return { injected: true }; } }; }; }
        }
        const a = Evil.from(["a", "b"]);
        a.toJSON = () => ({ injected: true });
        return a;""",
    "an element getter that changes its answer": """
        let n = 0;
        const a = ["a", "b"];
        Object.defineProperty(a, 1, { get() { n += 1; return n === 1 ? "b" : "x".repeat(5 * 1024 * 1024); } });
        return a;""",
    "a proxy whose reads change": """
        let reads = 0;
        return new Proxy(["a", "b"], { get(t, k) { if (k === "1") { reads += 1; return reads === 1 ? "b" : { injected: 1 }; } return t[k]; } });""",
}


@pytest.mark.parametrize("body", HOSTILE.values(), ids=list(HOSTILE))
def test_what_is_checked_is_what_goes_on(make_handler, chain, body):
    h = make_handler("globalThis.middleware.todoAdded = async (c) => {" + body + "};")
    result = chain("todoAdded", [h], TODO)
    assert result.trace[0].status == "ran"
    assert result.value == ["a", "b"]


def test_a_to_json_that_throws_later_cannot_break_the_engine(make_handler, chain):
    h = make_handler("globalThis.middleware.todoAdded = async (c) => {"
                     " let calls = 0; const a = ['a']; a.toJSON = () => { if (++calls > 1) throw new Error('x'); return a; };"
                     " return a; };")
    for _ in range(3):
        assert chain("todoAdded", [h], TODO, account="tojson").value == ["a"]

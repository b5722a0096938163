"""Loading an installation's code into an engine's shared isolate at chain time, when it goes wrong."""

from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import Handler, run_chain

from .conftest import PROMPT_CONTEXT
from .hostile.test_shared_isolate import APPEND

SPEC = HOOKS["systemPrompt"]


def _raw(n: int, code: str) -> Handler:
    """Code the install-time compile would have refused, sent to the engine as it is."""
    return Handler(str(9000 + n), f"raw-{n}", f"raw-hash-{n}", code)


def test_code_that_throws_at_load_fails_open_and_the_rest_of_the_chain_runs(one_engine, make_handler):
    _, tier = one_engine
    good = make_handler(APPEND)
    result = run_chain(tier, "thrower", SPEC, [_raw(1, "throw new Error('top-level boom');"), good], PROMPT_CONTEXT)
    assert result.value == "base"   # the chain goes on unchanged
    assert [(t.status, "top-level boom" in (t.warning or "")) for t in result.trace] == [("error", True), ("error", True)]
    # Another account on the same engine is unaffected, and so is the isolate.
    assert run_chain(tier, "bystander", SPEC, [good], PROMPT_CONTEXT).value == "base+"


def test_code_whose_top_level_never_ends_costs_the_isolate_not_the_engine(one_engine, make_handler):
    _, tier = one_engine
    good = make_handler(APPEND)
    assert run_chain(tier, "bystander", SPEC, [good], PROMPT_CONTEXT).value == "base+"
    replaced = tier.ping(tier.engines[0])["replaced"]
    result = run_chain(tier, "looper", SPEC, [_raw(2, "while (true) {}"), good], PROMPT_CONTEXT)
    assert result.value == "base"
    looper, other = result.trace
    assert "did not finish within 1 s" in looper.warning
    # The culprit is named like a handler that wedged (so it counts towards its quarantine); the
    # handler that merely could not run with it is an error, not blamed.
    assert (looper.status, looper.crash) == ("timeout", "wedged")
    assert (other.status, other.crash) == ("error", None)
    status = tier.ping(tier.engines[0])
    assert status["replaced"] == replaced + 1
    # The bystander's compartment went with the old isolate; its next call loads it again.
    assert run_chain(tier, "bystander", SPEC, [good], PROMPT_CONTEXT).value == "base+"

"""The chain runner's answer to an engine that lacks code: every handler's code goes again, more than once
if need be (the book of code shipped is per account, not per engine, so a retry may reach another engine
that lacks more than the first one said)."""

from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import MISSING_TRIES, Handler, chain_steps

PROMPT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "base"}


class Book:
    """Believes everything was shipped already (as a process does once one engine took the code)."""

    def unsent(self, account_key, handlers):
        return []

    def mark_shipped(self, account_key, handlers):
        pass


def _handler(n: int) -> Handler:
    return Handler(str(n), f"p{n}", f"hash{n}", f"code {n}")


def test_each_missing_answer_brings_every_handlers_code_again():
    handlers = [_handler(1), _handler(2)]
    steps = chain_steps(Book(), "acct", HOOKS["systemPrompt"], handlers, PROMPT)
    ask = next(steps)
    assert "code" not in ask.request
    for missing in (["1"], ["2"]):   # two engines, each lacking another handler's code
        ask = steps.send({"op": "result", "id": 1, "missing": missing})
        assert sorted(ask.request["code"]) == ["1", "2"]
    trace = [{"id": h.installation_id, "status": "ran", "changed": False, "durationMs": 1.0} for h in handlers]
    try:
        steps.send({"op": "result", "id": 1, "context": PROMPT, "trace": trace})
    except StopIteration as done:
        assert done.value.outcome == "unchanged" and [t.status for t in done.value.trace] == ["ran", "ran"]
    else:
        raise AssertionError("the chain did not finish")
    assert MISSING_TRIES >= 2

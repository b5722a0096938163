"""The type check's time bound: a check past it is stopped and answered as an error, and the next check
works (on the warm TypeScript isolate when a trivial check still answers in time, else on a fresh one)."""

import asyncio

import pytest

from plugins_app.runtime.engine import compiler as compiler_module
from plugins_app.runtime.engine.compiler import Compiler
from plugins_app.runtime.protocol import DEFAULT_LIMITS

TYPO = "globalThis.middleware.systemPrompt = async (c) => c.txet;"


@pytest.mark.slow
def test_a_check_past_its_time_is_stopped_and_the_next_works(monkeypatch):
    compiler = Compiler(128, DEFAULT_LIMITS)

    async def checks():
        await compiler._typescript()   # loaded outside the bound, as a warm engine has it
        monkeypatch.setattr(compiler_module, "TYPECHECK_SECONDS", 0.001)
        stopped = await compiler._typecheck(TYPO)
        monkeypatch.setattr(compiler_module, "TYPECHECK_SECONDS", 30)
        return stopped, await compiler._typecheck(TYPO)

    stopped, again = asyncio.run(checks())
    assert [e["message"] for e in stopped] == [
        "type checking took over 0.001 s; check the source with tsc and the SDK locally"]
    assert [(e["line"], "txet" in e["message"]) for e in again] == [(1, True)]

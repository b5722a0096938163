"""CPU is charged per invocation wherever it is spent (issue 28): a handler's body, its timers, its
microtasks. Each attack runs with a wall-clock budget far above its CPU budget, so only the CPU
budget can have stopped it; the chain goes on past it (fail-open)."""

import threading

import pytest

from ..conftest import PROMPT_CONTEXT

WALL_MS = 30_000   # never reached: the CPU budget must stop every attack first
CPU_MS = 300

BUSY = "const busy = (ms) => { const end = Date.now() + ms; while (Date.now() < end) {} };"
ATTACKS = {
    # 999 timers of 4 ms busy work each: ~4 s of CPU, though the handler yields between them.
    "timers": BUSY + """
globalThis.middleware.systemPrompt = async (c) => {
  await new Promise((resolve) => {
    let left = 999;
    for (let i = 0; i < 999; i++) setTimeout(() => { busy(4); if (--left === 0) resolve(); }, 0);
  });
  return c.systemPrompt + ' (timers done)';
};""",
    # Microtasks that never end: no task boundary, so only closing the isolate stops it.
    "microtasks": """
globalThis.middleware.systemPrompt = async (c) => { for (;;) { await null; } };""",
    "loop after await": """
globalThis.middleware.systemPrompt = async (c) => { await null; for (;;) {} };""",
    # Busy work in short bursts between awaits: it yields all the time, and its CPU still adds up.
    "bursts": BUSY + """
globalThis.middleware.systemPrompt = async (c) => {
  for (let i = 0; i < 400; i++) { busy(10); await new Promise((r) => setTimeout(r, 1)); }
  return c.systemPrompt + ' (bursts done)';
};""",
}
GOOD = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' +good';"


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_invocation_over_its_cpu_is_stopped_and_the_chain_goes_on(make_handler, chain, attack):
    result = chain("systemPrompt", [make_handler(ATTACKS[attack]), make_handler(GOOD)], PROMPT_CONTEXT,
                   budget_ms=WALL_MS, cpu_ms=CPU_MS)
    bad, good = result.trace
    assert bad.status == "timeout"
    assert f"{CPU_MS} ms of CPU" in bad.warning
    assert (good.status, result.value) == ("ran", "base +good")


def test_a_handler_within_its_cpu_runs_to_the_end(make_handler, chain):
    code = BUSY + """
globalThis.middleware.systemPrompt = async (c) => {
  for (let i = 0; i < 5; i++) { busy(10); await new Promise((r) => setTimeout(r, 0)); }
  return c.systemPrompt + ' (done)';
};"""
    result = chain("systemPrompt", [make_handler(code)], PROMPT_CONTEXT, budget_ms=WALL_MS, cpu_ms=2000)
    assert (result.trace[0].status, result.value) == ("ran", "base (done)")


def test_each_handler_gets_its_own_cpu_budget(make_handler, chain):
    # Three handlers of 150 ms of CPU each: 450 ms in the chain, each well within 300 ms.
    code = BUSY + "globalThis.middleware.systemPrompt = async (c) => { busy(150); return c.systemPrompt + '.'; };"
    result = chain("systemPrompt", [make_handler(code) for _ in range(3)], PROMPT_CONTEXT,
                   budget_ms=WALL_MS, cpu_ms=CPU_MS)
    assert [t.status for t in result.trace] == ["ran", "ran", "ran"]
    assert result.value == "base..."


def test_a_victim_account_answers_while_another_burns_cpu_in_timers(make_handler, chain):
    attacker = make_handler(ATTACKS["timers"])
    victim = make_handler(GOOD)
    outcomes = []
    attack = threading.Thread(target=lambda: outcomes.append(chain(
        "systemPrompt", [attacker], PROMPT_CONTEXT, account="cpu-attacker", budget_ms=WALL_MS, cpu_ms=CPU_MS)))
    attack.start()
    victims = [chain("systemPrompt", [victim], PROMPT_CONTEXT, account="cpu-victim") for _ in range(20)]
    attack.join(60)
    assert {(r.trace[0].status, r.value) for r in victims} == {("ran", "base +good")}
    [attacked] = outcomes
    assert attacked.trace[0].status == "timeout" and "CPU" in attacked.trace[0].warning

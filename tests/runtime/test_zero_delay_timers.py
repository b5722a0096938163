"""setTimeout with no delay, 0 or a negative delay runs as on the web: after the current task and its
microtasks, inside the invocation that set it."""

from .conftest import PROMPT_CONTEXT

ORDER = """
globalThis.middleware.systemPrompt = async (c) => {
  const order = [];
  await new Promise((resolve) => {
    setTimeout(() => order.push('none'));
    setTimeout(() => order.push('zero'), 0);
    setTimeout(() => order.push('negative'), -1);
    setTimeout(() => order.push('nan'), 'soon');
    setTimeout(() => { order.push('last'); resolve(); }, 0);
    Promise.resolve().then(() => order.push('microtask'));
    order.push('sync');
  });
  return order.join(',');
};"""


def test_a_timer_without_a_delay_runs_after_the_microtasks(make_handler, chain):
    result = chain("systemPrompt", [make_handler(ORDER)], PROMPT_CONTEXT)
    assert result.trace[0].status == "ran", result.trace[0].warning
    assert result.value == "sync,microtask,none,zero,negative,nan,last"


def test_a_cleared_zero_delay_timer_does_not_run(make_handler, chain):
    code = """globalThis.middleware.systemPrompt = async (c) => {
  let ran = 'no';
  const id = setTimeout(() => { ran = 'yes'; }, 0);
  clearTimeout(id);
  await new Promise((resolve) => setTimeout(resolve, 5));
  return ran;
};"""
    result = chain("systemPrompt", [make_handler(code)], PROMPT_CONTEXT)
    assert (result.trace[0].status, result.value) == ("ran", "no")

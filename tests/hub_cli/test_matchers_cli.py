"""`hub dev` honours a plugin's matcher as the hub's seam does; `hub explain` prints the hub's explain."""

from __future__ import annotations

import json

import pytest

from hub_cli import dev
from plugins_app.services.execution.hook_samples import example_context

GUARD = """
globalThis.middleware.sshCommandSending = async (context, tools) => tools.cancel("no recursive rm");
globalThis.middleware.match = { sshCommandSending: { command: { regex: "\\\\brm\\\\s+-[a-z]*r" } } };
"""


@pytest.fixture(scope="module")
def runner():
    running = dev.Runner()
    yield running
    running.close()


def test_dev_skips_a_handler_whose_matcher_fails_and_runs_one_whose_matcher_holds(runner, tmp_path):
    plugin = tmp_path / "guard.js"
    plugin.write_text(GUARD)
    compiled = runner.compile(plugin)
    assert compiled.matchers == {"sshCommandSending": {"command": {"regex": r"\brm\s+-[a-z]*r"}}}
    quiet = runner.run(compiled, "sshCommandSending", {**example_context("sshCommandSending"), "command": "ls"})
    assert (quiet.outcome, [t["status"] for t in quiet.trace], quiet.trace[0]["reason"]) == (
        "unchanged", ["skipped"], "match")
    assert "does not hold" in dev.render(quiet)
    caught = runner.run(compiled, "sshCommandSending", {**example_context("sshCommandSending"), "command": "rm -rf /"})
    assert (caught.outcome, caught.cancellation["reason"]) == ("cancelled", "no recursive rm")


def test_dev_refuses_a_bad_matcher_naming_its_path(runner, tmp_path):
    plugin = tmp_path / "bad.js"
    plugin.write_text("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;\n"
                      "globalThis.middleware.match = { systemPrompt: { agentId: { equals: 7 } } };")
    with pytest.raises(dev.DevError, match=r"middleware\.match\.systemPrompt\.agentId\.equals: ids are compared"):
        runner.compile(plugin)


def test_explain_prints_each_installation_and_why_not(hub, cli, tmp_path):
    key = hub.new_key()
    hub.ok(key, "POST", "plugins", {"name": "guard", "source": GUARD, "language": "javascript"})
    context = tmp_path / "ctx.json"
    context.write_text(json.dumps({**example_context("sshCommandSending"), "command": "ls -la"}))
    text = cli(key, "explain", "sshCommandSending", "--context", str(context)).stdout
    assert "sshCommandSending: 0 of 1 would run" in text
    assert "guard" in text and "skipped (match)" in text and "wanted command matches" in text
    answer = json.loads(cli(key, "explain", "sshCommandSending", "--context", str(context), "--json").stdout)
    assert [(s["plugin"], s["runs"], s["reason"]) for s in answer["chain"]] == [("guard", False, "match")]
    bad = cli(key, "explain", "sshCommandSending", "--context", str(context.with_name("nope.json")), check_status=1)
    assert "nope.json" in bad.stderr

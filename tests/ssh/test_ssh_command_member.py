"""host.ssh.command from real plugins in real engines, against a real sshd."""

import json
import time

import pytest

from plugins_app.models import UsageDaily
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import run_chain
from plugins_app.services.engine.tier import engine_key, get_tier
from plugins_app.services.execution.chain_cache import chain_cache
from plugins_app.services.execution.execute import execute_hook
from plugins_app.services.execution.host_bridge import HostBridge

from .conftest import free_port

pytestmark = [pytest.mark.ssh, pytest.mark.django_db]

SSH = ["host:ssh:command"]


def sending_context(host, command="ls"):
    return {"sessionId": "1", "agentId": "2", "sshHostId": str(host.pk), "hostDisplayName": host.display_name,
            "kind": "command", "command": command, "path": None, "content": None}


def reporter(body: str) -> str:
    """A sshCommandSending plugin that reports what `body` evaluates to as the new command."""
    return ("globalThis.middleware.sshCommandSending = async (context) => {\n"
            "  const report = async () => { " + body + " };\n"
            "  try { return { command: JSON.stringify(await report()) }; }\n"
            "  catch (e) { return { command: 'rejected: ' + e.message }; }\n"
            "};")


def sending(account, host, command="ls"):
    result, _ = execute_hook(account, "sshCommandSending", sending_context(host, command))
    return result


def test_a_call_runs_on_the_hooks_server_and_resolves_the_result(account, install, make_host):
    install(reporter('return await host.ssh.command("printf hi; printf oops >&2; exit 4");'), grant=SSH)
    result = sending(account, make_host())
    answer = json.loads(result.value["command"])
    assert {k: answer[k] for k in ("exitCode", "output", "errorOutput", "isTruncated")} == {
        "exitCode": 4, "output": "hi", "errorOutput": "oops", "isTruncated": False}
    assert answer["durationMs"] > 0


def test_a_call_fires_no_ssh_hook(account, install, make_host):
    observer = "\n".join(f"globalThis.middleware.{hook} = async () => ({{}});"
                         for hook in ("sshCommandSending", "sshCommandCompleted"))
    install(observer + "\nglobalThis.middleware.sshConnectionOpening = async () => {};", name="observer")
    install(reporter('return (await host.ssh.command("echo x")).output;'), grant=SSH)
    assert json.loads(sending(account, make_host()).value["command"]) == "x\n"
    assert set(UsageDaily.objects.filter(account=account).values_list("hook", flat=True)) == {"sshCommandSending"}


def test_without_the_permission_the_call_rejects(account, install, make_host):
    install(reporter('return await host.ssh.command("echo should-not-run");'))
    assert sending(account, make_host()).value["command"] == (
        "rejected: host.ssh.command needs the host:ssh:command permission, which an account admin "
        "has not granted to plugin-1")


def test_the_eleventh_call_of_an_invocation_rejects(account, install, make_host):
    install(reporter("""
        const seen = [];
        for (let i = 0; i < 11; i++) {
          try { seen.push((await host.ssh.command(`echo call-${i}`)).output.trim()); }
          catch (e) { seen.push(e.message); }
        }
        return seen;"""), grant=SSH)
    host = make_host()
    for _ in range(2):   # the count is per invocation: a new one starts again at zero
        seen = json.loads(sending(account, host).value["command"])
        assert seen[:10] == [f"call-{i}" for i in range(10)]
        assert seen[10] == "host.ssh.command: at most 10 calls per invocation; this was call 11"


def test_each_installation_has_its_own_ten_calls(account, install, make_host):
    body = 'let n = 0; for (let i = 0; i < 10; i++) { await host.ssh.command("true"); n++; } return n;'
    install("globalThis.middleware.sshCommandSending = async (c) => { "
            + body.replace("return n;", "return { command: c.command + ':' + n };") + " };", grant=SSH)
    install("globalThis.middleware.sshCommandSending = async (c) => { "
            + body.replace("return n;", "return { command: c.command + ':' + n };") + " };", grant=SSH)
    assert sending(account, make_host(), "start").value["command"] == "start:10:10"


def test_a_command_past_its_timeout_rejects(account, install, make_host):
    install(reporter('return await host.ssh.command("sleep 30", { timeoutSeconds: 1 });'), grant=SSH)
    started = time.monotonic()
    assert sending(account, make_host()).value["command"] == (
        "rejected: host.ssh.command: the command timed out after 1 s")
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("options, message", [
    ("{ timeoutSeconds: 91 }", "timeoutSeconds is 91; the maximum is 90"),
    ("{ timeoutSeconds: 0 }", "timeoutSeconds must be a positive number of seconds"),
    ('{ timeoutSeconds: "60" }', "timeoutSeconds must be a positive number of seconds"),
    ("{ timeout: 5 }", "unknown option 'timeout' (the only option is timeoutSeconds)"),
])
def test_bad_options_reject_before_anything_runs(account, install, make_host, sudo_log, options, message):
    install(reporter(f'return await host.ssh.command("sudo ran", {options});'), grant=SSH)
    assert sending(account, make_host()).value["command"] == f"rejected: host.ssh.command: {message}"
    assert not sudo_log.exists()


def test_it_only_reaches_a_server_of_the_account(account, other_account, install, make_host):
    install(reporter('return await host.ssh.command("echo x");'), grant=SSH)
    foreign = make_host(target=other_account)
    assert sending(account, foreign).value["command"] == (
        f"rejected: host.ssh.command: server {foreign.pk} is not one of this account's SSH hosts")


def test_an_unreachable_server_rejects(account, install, make_host):
    install(reporter('return await host.ssh.command("echo x");'), grant=SSH)
    port = free_port()
    rejected = sending(account, make_host(port=port)).value["command"]
    assert rejected.startswith("rejected: host.ssh.command: ")
    assert f"127.0.0.1:{port}): could not connect" in rejected


def test_host_ssh_is_absent_outside_the_ssh_hooks(account, install):
    install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' ' + typeof host.ssh;")
    context = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "ssh is"}
    result, _ = execute_hook(account, "systemPrompt", context)
    assert result.value == "ssh is undefined"


@pytest.mark.slow
def test_awaiting_a_command_is_not_charged_to_the_handler_budget(account, install, make_host):
    # Budget 300 ms; the engine's silence watchdog allows 0.3 + 5 s; the command takes 6 s.
    install(reporter('return (await host.ssh.command("sleep 6; echo done")).output.trim();'), grant=SSH)
    install('globalThis.middleware.sshCommandSending = async (c) => {\n'
            '  await host.ssh.command("true");\n'
            '  const t = Date.now(); while (Date.now() - t < 3000) {}\n'
            '  return { command: "spun" };\n'
            '};', grant=SSH, name="spinner")
    host = make_host()
    spec = HOOKS["sshCommandSending"]
    context = sending_context(host)
    result = run_chain(get_tier(), engine_key(account), spec, chain_cache.handlers(account, spec.name), context,
                       host=HostBridge(account, spec, context), budget_ms=300)
    waited, spun = result.trace
    assert (waited.status, spun.status) == ("ran", "timeout")
    assert result.value["command"] == '"done"'

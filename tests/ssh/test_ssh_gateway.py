"""POST /api/v1/ssh/execute end to end: the three SSH hooks around real operations on a real sshd."""

import json
import logging
from dataclasses import replace
from datetime import timedelta

import asyncssh
import pytest
from django.utils import timezone

from plugins_app.models import CancelLog, SshTurn, UsageDaily

from .conftest import free_port

pytestmark = [pytest.mark.ssh, pytest.mark.django_db]

SSH = ["host:ssh:command"]
HOOK_NAMES = ["sshConnectionOpening", "sshCommandSending", "sshCommandCompleted"]


@pytest.fixture
def gateway(api_client):
    def post(host, turn="turn-1", session="10", **body):
        payload = {"sessionId": session, "agentId": "20", "sshHostId": str(host.pk), "turnId": turn,
                   "kind": "command", **body}
        return api_client.post("/api/v1/ssh/execute", payload, format="json")
    return post


def runs(account, hook) -> int:
    return sum(UsageDaily.objects.filter(account=account, hook=hook).values_list("runs", flat=True))


def test_a_command_runs_between_the_hooks_and_the_turn_opens_once(gateway, make_host, install, account):
    install("globalThis.middleware.sshConnectionOpening = async () => {};\n"
            "globalThis.middleware.sshCommandSending = async () => ({});\n"
            "globalThis.middleware.sshCommandCompleted = async () => ({});", name="observer")
    host = make_host()
    first = gateway(host, command="printf hello; exit 2")
    assert first.status_code == 200, first.json()
    body = first.json()
    assert (body["outcome"], body["ran"], body["withheld"], body["cancellation"]) == ("completed", True, False, None)
    assert body["result"]["exitCode"] == 2 and body["result"]["output"] == "hello"
    assert body["result"]["errorOutput"] == "" and body["result"]["timedOut"] is False
    assert list(body["hooks"]) == HOOK_NAMES
    assert all(body["hooks"][h]["trace"][0]["status"] == "ran" for h in HOOK_NAMES)
    second = gateway(host, command="true").json()
    assert list(second["hooks"]) == ["sshCommandSending", "sshCommandCompleted"]
    assert list(gateway(host, turn="turn-2", command="true").json()["hooks"]) == HOOK_NAMES
    assert list(gateway(host, turn="turn-2", session="11", command="true").json()["hooks"]) == HOOK_NAMES
    assert runs(account, "sshConnectionOpening") == 3


def test_rm_guard_example_refuses_and_rewrites(gateway, make_host, install, account, tmp_path, examples):
    install(examples.read("rm-guard-sshCommandSending.ts"), name="rm guard", language="typescript")
    host = make_host()
    marker = tmp_path / "ran"
    refused = gateway(host, command=f"echo rm -rf / > {marker}").json()
    assert refused["outcome"] == "cancelled" and refused["ran"] is False and refused["result"] is None
    cancellation = refused["cancellation"]
    assert (cancellation["hook"], cancellation["plugin"]) == ("sshCommandSending", "rm-guard")
    assert cancellation["reason"] == "refusing to delete the root filesystem"
    assert not marker.exists()
    logged = CancelLog.objects.get(account=account)
    assert (logged.hook, str(logged.installation_id)) == ("sshCommandSending", cancellation["installationId"])
    rewritten = gateway(host, command="echo apt-get install cowsay").json()
    assert rewritten["operation"]["command"] == "echo apt-get install -y cowsay"
    assert rewritten["result"]["output"] == "apt-get install -y cowsay\n"


def test_aws_redaction_example_rewrites_what_the_model_sees(gateway, make_host, install, tmp_path, examples):
    install(examples.read("aws-redact-sshCommandCompleted.ts"), name="aws redact", language="typescript")
    host = make_host()
    body = gateway(host, command="echo key=AKIAABCDEFGHIJKLMNOP; echo AKIAQRSTUVWXYZ234567 >&2").json()
    assert body["result"]["output"] == "key=[redacted AWS key]\n"
    assert body["result"]["errorOutput"] == "[redacted AWS key]\n"
    secrets = tmp_path / "credentials"
    secrets.write_text("aws_access_key_id = AKIAABCDEFGHIJKLMNOP\n")
    read = gateway(host, kind="read_file", path=str(secrets)).json()
    assert read["result"]["output"] == "aws_access_key_id = [redacted AWS key]\n"
    assert read["result"]["errorOutput"] is None


@pytest.fixture
def fake_rg(sshd):
    rg = sshd.fakebin / "rg"
    rg.write_text("#!/bin/sh\necho 'ripgrep 14.0.0 (fake)'\n")
    rg.chmod(0o755)
    yield rg
    rg.unlink()


def test_ripgrep_setup_example_runs_once_per_turn(gateway, make_host, install, sudo_log, examples):
    install(examples.read("ripgrep-setup-sshConnectionOpening.ts"), name="ripgrep setup", language="typescript", grant=SSH)
    host = make_host()
    probe = gateway(host, turn="probe", command="command -v rg || echo none").json()
    if probe["result"]["output"] != "none\n":
        pytest.skip(f"ripgrep is installed on this machine ({probe['result']['output'].strip()}): "
                    "the install branch cannot run")
    sudo_log.unlink(missing_ok=True)   # the probe's own turn opened with the setup too
    for command in ("true", "ls"):
        body = gateway(host, command=command).json()
        assert body["outcome"] == "completed"
    assert sudo_log.read_text() == "apt-get install -y ripgrep\n"   # once for the turn, not per command
    gateway(host, turn="turn-2", command="true")
    assert sudo_log.read_text() == "apt-get install -y ripgrep\n" * 2


def test_ripgrep_setup_example_is_a_no_op_when_rg_exists(gateway, make_host, install, sudo_log, fake_rg, examples):
    install(examples.read("ripgrep-setup-sshConnectionOpening.ts"), name="ripgrep setup", language="typescript", grant=SSH)
    body = gateway(make_host(), command="rg --version").json()
    assert body["hooks"]["sshConnectionOpening"]["trace"][0]["status"] == "ran"
    assert body["result"]["output"] == "ripgrep 14.0.0 (fake)\n"
    assert not sudo_log.exists()


def test_a_refused_connection_stays_refused_for_the_turn(gateway, make_host, install, account, tmp_path):
    install("globalThis.middleware.sshConnectionOpening = async (c, tools) => "
            "tools.cancel('maintenance on ' + c.hostDisplayName);")
    host = make_host(display_name="db-1")
    marker = tmp_path / "ran"
    first = gateway(host, command=f"touch {marker}").json()
    assert first["outcome"] == "cancelled" and first["cancellation"]["reason"] == "maintenance on db-1"
    assert list(first["hooks"]) == ["sshConnectionOpening"]
    again = gateway(host, command=f"touch {marker}").json()
    assert again["outcome"] == "cancelled" and again["hooks"] == {}
    assert again["cancellation"] == dict(first["cancellation"], earlier=True)
    assert not marker.exists()
    assert runs(account, "sshConnectionOpening") == 1
    gateway(host, turn="turn-2", command="true")
    assert runs(account, "sshConnectionOpening") == 2


def test_a_completed_cancel_withholds_output_of_an_operation_that_ran(gateway, make_host, install, tmp_path):
    install("globalThis.middleware.sshCommandCompleted = async (c, tools) => tools.cancel('not for the model');")
    marker = tmp_path / "ran"
    body = gateway(make_host(), command=f"echo secret; touch {marker}").json()
    assert (body["outcome"], body["ran"], body["withheld"], body["result"]) == ("withheld", True, True, None)
    assert body["cancellation"]["reason"] == "not for the model"
    assert marker.exists()


def test_opening_sees_a_tunnel_hosts_connection_and_the_tunnel_works(gateway, make_host, install, sshd, jump_sshd):
    install("globalThis.middleware.sshConnectionOpening = async (c, tools) => "
            "c.sessionId === '99' ? tools.cancel(JSON.stringify(c)) : undefined;")
    jump = make_host(display_name="bastion", port=jump_sshd.port, host_key=jump_sshd.host_key)
    inner = make_host(display_name="inner", connection_type="tunnel", port=None, jump_host_id=str(jump.pk),
                      tunnel_port=sshd.port)
    seen = json.loads(gateway(inner, session="99", command="true").json()["cancellation"]["reason"])
    assert seen == {"sessionId": "99", "agentId": "20", "sshHostId": str(inner.pk), "hostDisplayName": "inner",
                    "hostname": "127.0.0.1", "port": None, "connectionType": "tunnel", "username": inner.username}
    assert gateway(inner, command="echo inside").json()["result"]["output"] == "inside\n"
    assert f"target 127.0.0.1 port {sshd.port}" in jump_sshd.log_text()


def test_file_operations_go_over_sftp_and_through_the_hooks(gateway, make_host, install, tmp_path):
    (tmp_path / "sandbox").mkdir()
    install("globalThis.middleware.sshCommandSending = async (c) => c.kind === 'command' ? {} : "
            "{ path: c.path.replace('/forbidden/', '/sandbox/'), "
            "  ...(c.content === null ? {} : { content: c.content + '-- written by the agent\\n' }) };")
    install("globalThis.middleware.sshCommandCompleted = async (c, tools) => "
            "c.command === null && c.path ? { output: c.output === null ? null : `[${c.kind}] ${c.output}` } "
            ": tools.cancel('unexpected context');", name="completed")
    host = make_host()
    wanted, actual = str(tmp_path / "forbidden" / "a.txt"), tmp_path / "sandbox" / "a.txt"
    written = gateway(host, kind="write_file", path=wanted, content="hello\n").json()
    assert written["outcome"] == "completed" and written["operation"]["path"] == str(actual)
    assert (written["result"]["exitCode"], written["result"]["output"]) == (0, None)
    assert actual.read_text() == "hello\n-- written by the agent\n"
    read = gateway(host, kind="read_file", path=wanted).json()
    assert read["result"]["output"] == "[read_file] hello\n-- written by the agent\n"
    (tmp_path / "sandbox" / "b.txt").write_text("")
    listed = gateway(host, kind="list_files", path=str(tmp_path / "forbidden") + "/").json()
    assert listed["result"]["output"] == "[list_files] a.txt\nb.txt"
    gateway(host, kind="edit_file", path=wanted, content="edited\n")
    assert actual.read_text() == "edited\n-- written by the agent\n"
    deleted = gateway(host, kind="delete_file", path=wanted).json()
    assert deleted["result"]["exitCode"] == 0 and not actual.exists()
    missing = gateway(host, kind="delete_file", path=wanted).json()
    assert missing["outcome"] == "completed" and missing["result"]["exitCode"] == 1


def test_a_chain_that_removes_the_command_cancels_the_operation(gateway, make_host, install):
    install("globalThis.middleware.sshCommandSending = async () => ({ command: null });")
    body = gateway(make_host(), command="echo x").json()
    assert body["outcome"] == "cancelled" and body["ran"] is False
    assert body["cancellation"] == {"hook": "sshCommandSending", "installationId": None, "plugin": None,
                                    "reason": "the sshCommandSending chain left no command to run"}


def test_a_slow_command_answers_with_what_it_printed_before_the_timeout(gateway, make_host, settings):
    # 3 s, not 1: on a loaded machine the session's start alone has taken over a second, and the echo
    # never ran before the timeout.
    settings.HUB_SSH = replace(settings.HUB_SSH, command_timeout_seconds=3)
    body = gateway(make_host(), command="echo partial; sleep 30").json()
    assert body["outcome"] == "completed"
    assert body["result"]["exitCode"] == 124 and body["result"]["timedOut"] is True
    assert body["result"]["output"] == "partial\n"


def test_long_output_is_capped_and_the_completed_hook_knows(gateway, make_host, install, settings):
    settings.HUB_SSH = replace(settings.HUB_SSH, max_output_bytes=100)
    install("globalThis.middleware.sshCommandCompleted = async (c) => "
            "({ output: c.isTruncated ? c.output.length + ' chars kept' : 'whole' });")
    body = gateway(make_host(), command="head -c 1000 /dev/zero | tr '\\0' x").json()
    assert body["result"]["isTruncated"] is True
    assert body["result"]["output"] == "100 chars kept"


def test_an_unreachable_server_answers_502_after_the_hooks(gateway, make_host, install):
    install("globalThis.middleware.sshCommandCompleted = async (c, tools) => tools.cancel('must not fire');")
    port = free_port()
    response = gateway(make_host(port=port), command="true")
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "ssh_unavailable"
    assert f"127.0.0.1:{port}): could not connect" in error["message"]
    assert error["hooksFired"] == ["sshConnectionOpening", "sshCommandSending"]


def test_a_changed_host_key_is_refused(gateway, make_host, tmp_path):
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    marker = tmp_path / "ran"
    response = gateway(make_host(host_key=other), command=f"touch {marker}")
    assert response.status_code == 502
    assert "does not match the pinned host key; connection refused" in response.json()["error"]["message"]
    assert not marker.exists()


def test_an_opening_in_progress_answers_409_and_an_abandoned_one_is_taken_over(gateway, make_host, account):
    host = make_host()
    turn = SshTurn.objects.create(ssh_host=host, session_id="10", turn_id="turn-1")
    response = gateway(host, command="true")
    assert response.status_code == 409
    assert "still being opened" in response.json()["error"]["message"]
    SshTurn.objects.filter(pk=turn.pk).update(updated_at=timezone.now() - timedelta(hours=1))
    body = gateway(host, command="true").json()
    assert body["outcome"] == "completed" and "sshConnectionOpening" in body["hooks"]
    assert SshTurn.objects.get(pk=turn.pk).state == SshTurn.State.OPEN


def test_remembered_turns_expire(gateway, make_host, settings):
    settings.HUB_SSH = replace(settings.HUB_SSH, turn_ttl_seconds=3600)
    host = make_host()
    gateway(host, command="true")
    SshTurn.objects.update(created_at=timezone.now() - timedelta(hours=2))
    assert "sshConnectionOpening" in gateway(host, command="true").json()["hooks"]
    assert SshTurn.objects.count() == 1


def test_no_key_material_reaches_the_logs_or_the_answer(gateway, make_host, sshd, caplog):
    caplog.set_level(logging.DEBUG)
    response = gateway(make_host(), command="echo ok")
    secret_line = sshd.client_key.splitlines()[1]
    assert response.json()["result"]["output"] == "ok\n"
    assert secret_line not in caplog.text
    assert secret_line not in response.content.decode()


@pytest.mark.parametrize("body, field", [
    ({"command": None}, "command"),
    ({"command": "ls", "path": "/tmp"}, "path"),
    ({"kind": "read_file", "command": "ls"}, "command"),
    ({"kind": "read_file"}, "path"),
    ({"kind": "write_file", "path": "/tmp/x"}, "content"),
    ({"kind": "delete_file", "path": "/tmp/x", "content": "x"}, "content"),
    ({"kind": "reboot", "command": "ls"}, "kind"),
    ({"command": "ls", "sessionId": 10}, "sessionId"),
    ({"command": "ls", "turnId": ""}, "turnId"),
    ({"command": "ls", "surprise": 1}, "surprise"),
])
def test_bad_requests_name_the_field_and_change_nothing(gateway, make_host, body, field):
    response = gateway(make_host(), **body)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(f"{field}: ")
    assert not SshTurn.objects.exists()


def test_only_the_accounts_own_servers(gateway, make_host, other_account):
    assert gateway(make_host(target=other_account), command="true").status_code == 404
    response = gateway(type("Missing", (), {"pk": 999999})(), command="true")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert not SshTurn.objects.exists()

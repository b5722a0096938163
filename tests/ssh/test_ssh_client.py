"""The hub's SSH client against real sshd: commands, caps, timeouts, trust, tunnels and SFTP."""

import os
import pwd
import time
from dataclasses import replace

import asyncssh
import pytest

from plugins_app.services.ssh import client as ssh

from .conftest import USER, free_port

pytestmark = [pytest.mark.ssh, pytest.mark.django_db]


def run(host, command, timeout=20, **kw):
    return ssh.run_command(ssh.target_for(host), command, timeout=timeout, **kw)


def other_host_key() -> str:
    return asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode()


def test_a_command_reports_its_exit_code_and_both_streams(make_host):
    result = run(make_host(), "printf out; printf err >&2; exit 3")
    assert (result.exit_code, result.output, result.error_output) == (3, "out", "err")
    assert result.is_truncated is False
    assert result.duration_ms > 0


def test_commands_run_through_the_users_login_shell_and_carry_nothing_over(make_host):
    host = make_host()
    login_shell = pwd.getpwnam(USER).pw_shell
    assert run(host, 'echo "$0|$SHELL"').output.strip() == f"{os.path.basename(login_shell)}|{login_shell}"
    run(host, "cd /tmp && export HUB_CARRIED=yes")
    result = run(host, 'pwd; echo "${HUB_CARRIED:-unset}"')
    assert result.output.split() == [pwd.getpwnam(USER).pw_dir, "unset"]


def test_output_is_capped_and_says_so(make_host, settings):
    settings.HUB_SSH = replace(settings.HUB_SSH, max_output_bytes=1000)
    result = run(make_host(), "head -c 5000 /dev/zero | tr '\\0' a; echo fine >&2")
    assert result.output == "a" * 1000
    assert result.is_truncated is True
    assert (result.exit_code, result.error_output) == (0, "fine\n")


def test_a_cut_inside_a_utf8_character_drops_the_half_character(make_host):
    result = run(make_host(), "for i in $(seq 600); do printf 'é'; done", max_output=1001)
    assert result.output == "é" * 500
    assert result.is_truncated


def test_a_command_that_floods_output_is_stopped(make_host):
    started = time.monotonic()
    result = run(make_host(), "yes", max_output=1000)
    assert time.monotonic() - started < 15
    assert result.output == "y\n" * 500
    assert result.is_truncated
    assert result.exit_code == ssh.GONE_EXIT_CODE


def test_a_command_past_its_timeout_raises_with_what_it_printed(make_host):
    started = time.monotonic()
    with pytest.raises(ssh.SshTimedOut) as raised:
        run(make_host(), "echo before; sleep 30", timeout=1)
    assert time.monotonic() - started < 15
    assert raised.value.result.output == "before\n"
    assert raised.value.result.exit_code == ssh.TIMED_OUT_EXIT_CODE
    assert raised.value.result.timed_out


def test_a_host_key_other_than_the_pinned_one_is_refused(make_host):
    host = make_host(host_key=other_host_key())
    with pytest.raises(ssh.SshFailed, match="does not match the pinned host key"):
        run(host, "echo should-not-run")


def test_an_unreachable_port_fails_clearly(make_host):
    port = free_port()
    with pytest.raises(ssh.SshFailed, match=f"127.0.0.1:{port}.*could not connect"):
        run(make_host(port=port), "true")


def test_a_key_the_server_does_not_know_is_refused(make_host):
    stranger = asyncssh.generate_private_key("ssh-ed25519").export_private_key().decode()
    with pytest.raises(ssh.SshFailed, match=f"refused the key for {USER}"):
        run(make_host(private_key=stranger), "true")


def test_a_tunnel_host_is_reached_through_its_jump_host(make_host, sshd, jump_sshd):
    jump = make_host(display_name="bastion", port=jump_sshd.port, host_key=jump_sshd.host_key)
    inner = make_host(display_name="inner", connection_type="tunnel", port=None, jump_host_id=str(jump.pk),
                      tunnel_port=sshd.port)
    assert run(inner, "echo through").output == "through\n"
    assert f"target 127.0.0.1 port {sshd.port}" in jump_sshd.log_text()


def test_a_tunnel_checks_the_jump_hosts_pinned_key_too(make_host, sshd, jump_sshd):
    jump = make_host(display_name="bastion", port=jump_sshd.port, host_key=other_host_key())
    inner = make_host(display_name="inner", connection_type="tunnel", port=None, jump_host_id=str(jump.pk),
                      tunnel_port=sshd.port)
    with pytest.raises(ssh.SshFailed, match="jump host bastion .*does not match the pinned host key"):
        run(inner, "true")


def file_op(host, kind, path, content=None, **kw):
    return ssh.run_file_operation(ssh.target_for(host), kind, str(path), content, timeout=20, **kw)


def test_sftp_writes_reads_lists_edits_and_deletes(make_host, tmp_path):
    host = make_host()
    target = tmp_path / "notes.txt"
    written = file_op(host, "write_file", target, "first\nsecond é\n")
    assert (written.exit_code, written.output, written.error_output) == (0, None, None)
    assert target.read_text() == "first\nsecond é\n"
    assert file_op(host, "read_file", target).output == "first\nsecond é\n"
    (tmp_path / "b.log").write_text("")
    assert file_op(host, "list_files", tmp_path).output == "b.log\nnotes.txt"
    assert file_op(host, "edit_file", target, "edited\n").exit_code == 0
    assert target.read_text() == "edited\n"
    assert file_op(host, "delete_file", target).exit_code == 0
    assert not target.exists()


def test_sftp_failures_are_results_not_errors(make_host, tmp_path):
    host = make_host()
    missing = tmp_path / "missing.txt"
    read = file_op(host, "read_file", missing)
    assert read.exit_code == 1
    assert read.error_output.startswith(f"read_file {missing}: ")
    edited = file_op(host, "edit_file", missing, "x")
    assert edited.exit_code == 1 and "not an existing file" in edited.error_output
    assert not missing.exists()


def test_sftp_reads_are_capped(make_host, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("z" * 5000)
    result = file_op(make_host(), "read_file", big, max_output=100)
    assert result.output == "z" * 100
    assert result.is_truncated

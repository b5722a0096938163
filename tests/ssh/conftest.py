"""Real OpenSSH servers on loopback for the SSH tests, with their own host and client keys."""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from plugins_app.models import SshHost
from plugins_app.services.ssh import hosts as ssh_hosts

SSHD = Path("/usr/sbin/sshd")
USER = getpass.getuser()


@dataclass
class Sshd:
    port: int
    host_key: str          # the server's public host key line
    client_key: str        # PEM of the key authorized_keys accepts
    log: Path
    fakebin: Path          # first on the PATH of every session

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_key(path: Path, key) -> None:
    key.write_private_key(str(path))
    path.chmod(0o600)


def _start(root: Path, client_key, *, log_level: str = "INFO"):
    root.mkdir(parents=True)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    _write_key(root / "host_key", host_key)
    (root / "authorized_keys").write_text(client_key.export_public_key("openssh").decode())
    fakebin = root / "fakebin"
    fakebin.mkdir()
    # A stand-in for sudo: records what it was asked to do, so no test ever installs anything.
    sudo = fakebin / "sudo"
    sudo.write_text(f'#!/bin/sh\necho "$*" >> {root / "sudo.log"}\n')
    sudo.chmod(0o755)
    port = free_port()
    config = root / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {root / 'host_key'}",
        f"AuthorizedKeysFile {root / 'authorized_keys'}", f"PidFile {root / 'sshd.pid'}",
        "UsePAM no", "StrictModes no", "PermitRootLogin prohibit-password", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "AllowTcpForwarding yes", "Subsystem sftp internal-sftp",
        f"SetEnv PATH={fakebin}:/usr/local/bin:/usr/bin:/bin", f"LogLevel {log_level}", "",
    ]))
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)   # OpenSSH's privilege separation directory
    log = root / "sshd.log"
    process = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL,
                               stderr=log.open("wb"))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"sshd exited with {process.returncode}:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        process.kill()
        pytest.fail(f"sshd did not listen on port {port}:\n{log.read_text()}")
    server = Sshd(port, host_key.export_public_key("openssh").decode().strip(),
                  client_key.export_private_key("openssh").decode(), log, fakebin)
    return server, process


@pytest.fixture(scope="session")
def client_key():
    return asyncssh.generate_private_key("ssh-ed25519")


def _require_sshd():
    if not SSHD.exists():
        if os.environ.get("HUB_TEST_SSH"):
            pytest.fail(f"HUB_TEST_SSH is set but {SSHD} is missing: apt-get install openssh-server")
        pytest.skip(f"{SSHD} is missing (apt-get install openssh-server)")


@pytest.fixture(scope="session")
def sshd(tmp_path_factory, client_key):
    _require_sshd()
    server, process = _start(tmp_path_factory.mktemp("sshd") / "main", client_key)
    yield server
    process.kill()
    process.wait(10)


@pytest.fixture(scope="session")
def jump_sshd(tmp_path_factory, client_key):
    """A second server, used as the jump host; DEBUG1 logs show the tunnels it forwards."""
    _require_sshd()
    server, process = _start(tmp_path_factory.mktemp("sshd") / "jump", client_key, log_level="DEBUG1")
    yield server
    process.kill()
    process.wait(10)


@pytest.fixture
def sudo_log(sshd):
    """What the fake sudo on the server was asked to run, one line per call."""
    path = sshd.fakebin.parent / "sudo.log"
    path.unlink(missing_ok=True)
    return path


@pytest.fixture
def make_host(account, sshd):
    """An SshHost row of `account` pointing at the test sshd (override any field)."""
    def make(target=None, **fields):
        data = {"display_name": f"server {SshHost.objects.count() + 1}", "hostname": "127.0.0.1",
                "port": sshd.port, "username": USER, "host_key": sshd.host_key, "private_key": sshd.client_key}
        data.update(fields)
        return ssh_hosts.create_host(target or account, data)
    return make

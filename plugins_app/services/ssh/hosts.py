"""An account's SSH hosts: checked create/update/delete; private keys go in encrypted, never out."""

from __future__ import annotations

import asyncssh
from django.db import IntegrityError, models, transaction
from django.db.models import RestrictedError

from accounts.models import Account
from plugins_app.errors import Conflict, InvalidInput
from plugins_app.models import SshHost
from plugins_app.services.ids import get_in_account, parse_id

DIRECT, TUNNEL = SshHost.ConnectionType.DIRECT, SshHost.ConnectionType.TUNNEL
DEFAULT_TUNNEL_PORT = 22
# model attribute -> the name the API (and so every error) uses
API_NAMES = {
    "display_name": "displayName", "hostname": "hostname", "port": "port",
    "connection_type": "connectionType", "jump_host_id": "jumpHostId", "tunnel_port": "tunnelPort",
    "username": "username", "private_key": "privateKey", "host_key": "hostKey",
}
REQUIRED = ("display_name", "hostname", "username", "private_key", "host_key")


def list_hosts(account: Account) -> models.QuerySet[SshHost]:
    return SshHost.objects.filter(account=account).select_related("jump_host").order_by("display_name", "id")


def get_host(account, host_id, field: str = "sshHostId") -> SshHost:
    return get_in_account(SshHost.objects.select_related("jump_host"), account, host_id, field,
                          f"SSH host {host_id} not found in this account")


def create_host(account, data: dict) -> SshHost:
    missing = [name for name in REQUIRED if data.get(name) in (None, "")]
    if missing:
        raise InvalidInput(API_NAMES[missing[0]], "required")
    host = SshHost(account=account, connection_type=data.get("connection_type") or DIRECT)
    return _save(host, data, creating=True)


def update_host(account, host_id, data: dict) -> SshHost:
    """Change the given fields; an omitted privateKey keeps the stored key."""
    return _save(get_host(account, host_id), data, creating=False)


def delete_host(account, host_id) -> None:
    host = get_host(account, host_id)
    try:
        host.delete()
    except RestrictedError:
        names = ", ".join(sorted(h.display_name for h in host.tunnel_hosts.all()))
        raise Conflict(f"{host.display_name} is the jump host of {names}; change or delete those first") from None


def _save(host: SshHost, data: dict, *, creating: bool) -> SshHost:
    prepare(host, data, creating=creating)
    try:
        with transaction.atomic():
            host.save()
    except IntegrityError:
        raise Conflict(f"this account already has an SSH host named {host.display_name!r}") from None
    return host


def prepare(host: SshHost, data: dict, *, creating: bool) -> SshHost:
    """Check `data` (model attribute names) against `host` and apply it, without saving.
    Raises InvalidInput naming the API field; `host` is then unusable."""
    fields = dict(data)
    private_key = fields.pop("private_key", None)
    if "host_key" in fields:
        fields["host_key"], host.host_key_fingerprint = parse_host_key(fields["host_key"])
    for name in ("display_name", "hostname", "username"):
        if name in fields:
            fields[name] = _text(name, fields[name], _max_length(name))
    for name, value in fields.items():
        setattr(host, name, value)
    if creating and host.is_tunnel and "tunnel_port" not in fields:
        host.tunnel_port = DEFAULT_TUNNEL_PORT
    _check_connection(host)
    if private_key is not None:
        pem, host.public_key = parse_private_key(private_key)
        host.set_private_key(pem)
    return host


def _max_length(name: str) -> int:
    field = SshHost._meta.get_field(name)
    assert isinstance(field, models.CharField) and field.max_length is not None
    return field.max_length


def _text(name: str, value, max_length: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(API_NAMES[name], "must be a non-empty string")
    value = value.strip()
    if len(value) > max_length:
        raise InvalidInput(API_NAMES[name], f"at most {max_length} characters")
    if name != "display_name" and (any(c.isspace() for c in value) or value.startswith("-")):
        raise InvalidInput(API_NAMES[name], "must not contain spaces or start with '-'")
    return value


def _check_port(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise InvalidInput(API_NAMES[name], "expected a port number from 1 to 65535")


def _check_connection(host: SshHost) -> None:
    if host.connection_type not in (DIRECT, TUNNEL):
        raise InvalidInput("connectionType", "expected direct or tunnel")
    if host.connection_type == DIRECT:
        if host.port is None:
            raise InvalidInput("port", "a direct host needs its SSH port (usually 22)")
        _check_port("port", host.port)
        if host.jump_host_id is not None:
            raise InvalidInput("jumpHostId", "only a tunnel host goes through a jump host")
        if host.tunnel_port is not None:
            raise InvalidInput("tunnelPort", "only a tunnel host has a tunnel port")
        return
    if host.port is not None:
        raise InvalidInput("port", "a tunnel host has no port of its own: set tunnelPort, the port the "
                                   "jump host reaches it on")
    if host.tunnel_port is not None:
        _check_port("tunnel_port", host.tunnel_port)
    if host.jump_host_id is None:
        raise InvalidInput("jumpHostId", "a tunnel host needs a jump host")
    jump = SshHost.objects.filter(pk=parse_id(str(host.jump_host_id), "jumpHostId"), account_id=host.account_id).first()
    if jump is None:
        raise InvalidInput("jumpHostId", f"SSH host {host.jump_host_id} is not one of this account's hosts")
    if jump.pk == host.pk or jump.is_tunnel:
        raise InvalidInput("jumpHostId", "the jump host must be another, direct, host")
    if host.pk is not None and host.tunnel_hosts.exists():
        raise InvalidInput("connectionType", "other hosts tunnel through this one; it must stay direct")
    host.jump_host = jump


def parse_host_key(text) -> tuple[str, str]:
    """An OpenSSH public key line -> (the normalized line, its SHA256 fingerprint)."""
    if not isinstance(text, str) or not text.strip() or "\n" in text.strip():
        raise InvalidInput("hostKey", "expected one OpenSSH public key line, e.g. the server's "
                                      "/etc/ssh/ssh_host_ed25519_key.pub")
    try:
        key = asyncssh.import_public_key(text.strip())
    except (asyncssh.KeyImportError, ValueError):
        raise InvalidInput("hostKey", "not an OpenSSH public key line (\"ssh-ed25519 AAAA...\")") from None
    return key.export_public_key("openssh").decode().strip(), key.get_fingerprint("sha256")


def parse_private_key(text) -> tuple[str, str]:
    """A private key in any format asyncssh reads -> (OpenSSH PEM, its public key line)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("privateKey", "expected a private key (PEM text)")
    try:
        key = asyncssh.import_private_key(text.strip() + "\n")
    except asyncssh.KeyImportError as exc:
        if "passphrase" in str(exc).lower():
            raise InvalidInput("privateKey", "encrypted private keys are not supported: remove the "
                                             "passphrase (ssh-keygen -p) before storing it") from None
        raise InvalidInput("privateKey", "not a private key asyncssh can read") from None
    except ValueError:
        raise InvalidInput("privateKey", "not a private key asyncssh can read") from None
    key.set_comment(None)
    return key.export_private_key("openssh").decode(), key.export_public_key("openssh").decode().strip()

"""/api/v1/ssh-hosts and the SSH host admin: checked input, write-only private keys, encryption at rest."""

from dataclasses import replace

import asyncssh
import pytest
from django.contrib.auth import get_user_model

from accounts.models import Membership
from plugins_app.models import SshHost
from plugins_app.services.ssh import hosts as ssh_hosts

pytestmark = pytest.mark.django_db

URL = "/api/v1/ssh-hosts"


def keypair():
    key = asyncssh.generate_private_key("ssh-ed25519")
    return key.export_private_key().decode(), key.export_public_key().decode().strip()


@pytest.fixture
def client_key():
    return keypair()


@pytest.fixture
def server_key():
    return keypair()[1] + " root@server"


@pytest.fixture
def direct(client_key, server_key):
    return {"displayName": "web-1", "hostname": "web-1.internal", "port": 22, "username": "deploy",
            "privateKey": client_key[0], "hostKey": server_key}


def secret_body(pem: str) -> str:
    """The base64 body of a PEM: what must never show up anywhere."""
    return "".join(pem.strip().splitlines()[1:-1])


def test_create_returns_everything_but_the_private_key(api_client, direct, client_key, server_key):
    response = api_client.post(URL, direct, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["id"] == str(SshHost.objects.get().pk)
    assert {k: body[k] for k in ("displayName", "hostname", "port", "connectionType", "jumpHostId", "tunnelPort",
                                 "username", "hostKey")} == {
        "displayName": "web-1", "hostname": "web-1.internal", "port": 22, "connectionType": "direct",
        "jumpHostId": None, "tunnelPort": None, "username": "deploy", "hostKey": server_key}
    assert body["publicKey"] == client_key[1]
    assert body["hostKeyFingerprint"].startswith("SHA256:")
    assert "privateKey" not in body
    for response in (api_client.get(URL), api_client.get(f"{URL}/{body['id']}")):
        assert secret_body(client_key[0]) not in response.content.decode()
        assert "privateKey" not in response.content.decode()


def test_the_private_key_is_encrypted_at_rest(api_client, direct, client_key, settings):
    api_client.post(URL, direct, format="json")
    host = SshHost.objects.get()
    stored = bytes(host.private_key_encrypted)
    assert secret_body(client_key[0]).encode() not in stored
    assert b"PRIVATE KEY" not in stored
    assert asyncssh.import_private_key(host.private_key()).export_public_key().decode().strip() == client_key[1]
    settings.SECRET_KEY = "a different secret key"
    with pytest.raises(ValueError, match="cannot be decrypted"):
        host.private_key()
    settings.SECRET_KEY_FALLBACKS = ["django-insecure-dev-only-change-me-in-production"]
    assert "PRIVATE KEY" in host.private_key()   # a rotated key still reads what the old one wrote


def test_an_explicit_key_secret_is_used_instead_of_secret_key(account, direct, settings, client_key):
    settings.HUB_SSH = replace(settings.HUB_SSH, key_secret="ssh only")
    host = ssh_hosts.create_host(account, {"display_name": "a", "hostname": "h", "port": 22, "username": "u",
                                           "private_key": client_key[0], "host_key": direct["hostKey"]})
    settings.HUB_SSH = replace(settings.HUB_SSH, key_secret="")
    with pytest.raises(ValueError):
        host.private_key()


def test_patch_changes_fields_and_keeps_the_key_unless_given(api_client, direct):
    host_id = api_client.post(URL, direct, format="json").json()["id"]
    before = bytes(SshHost.objects.get().private_key_encrypted)
    response = api_client.patch(f"{URL}/{host_id}", {"port": 2222, "displayName": "web-one"}, format="json")
    assert response.status_code == 200
    assert (response.json()["port"], response.json()["displayName"]) == (2222, "web-one")
    assert bytes(SshHost.objects.get().private_key_encrypted) == before
    new_pem, new_public = keypair()
    assert api_client.patch(f"{URL}/{host_id}", {"privateKey": new_pem}, format="json").json()["publicKey"] == new_public


def test_tunnel_hosts_go_through_a_direct_jump_host(api_client, direct):
    jump_id = api_client.post(URL, direct, format="json").json()["id"]
    tunnel = dict(direct, displayName="db-1", hostname="10.0.0.5", port=None, connectionType="tunnel",
                  jumpHostId=jump_id)
    response = api_client.post(URL, tunnel, format="json")
    assert response.status_code == 201, response.json()
    assert (response.json()["port"], response.json()["tunnelPort"], response.json()["jumpHostId"]) == (None, 22, jump_id)
    deleted = api_client.delete(f"{URL}/{jump_id}")
    assert deleted.status_code == 409 and "jump host of db-1" in deleted.json()["error"]["message"]
    changed = api_client.patch(f"{URL}/{jump_id}", {"connectionType": "tunnel", "port": None,
                                                    "jumpHostId": response.json()["id"]}, format="json")
    assert changed.status_code == 400
    assert api_client.delete(f"{URL}/{response.json()['id']}").status_code == 204
    assert api_client.delete(f"{URL}/{jump_id}").status_code == 204
    assert not SshHost.objects.exists()


@pytest.mark.parametrize("change, field", [
    ({"hostKey": "not a key"}, "hostKey"),
    ({"hostKey": None}, "hostKey"),
    ({"privateKey": "-----BEGIN OPENSSH PRIVATE KEY-----\nnope\n-----END OPENSSH PRIVATE KEY-----"}, "privateKey"),
    ({"port": 70000}, "port"),
    ({"port": None}, "port"),
    ({"hostname": "two words"}, "hostname"),
    ({"username": ""}, "username"),
    ({"connectionType": "carrier-pigeon"}, "connectionType"),
    ({"connectionType": "tunnel", "port": None}, "jumpHostId"),
    ({"connectionType": "tunnel"}, "port"),
    ({"jumpHostId": "1"}, "jumpHostId"),
    ({"tunnelPort": 22}, "tunnelPort"),
    ({"secret": "x"}, "secret"),
])
def test_bad_input_names_the_field_and_stores_nothing(api_client, direct, change, field):
    response = api_client.post(URL, {**direct, **change}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["message"].startswith(f"{field}: ")
    assert not SshHost.objects.exists()


def test_missing_required_fields_are_named(api_client, direct):
    for name in ("displayName", "hostname", "username", "privateKey", "hostKey"):
        body = {k: v for k, v in direct.items() if k != name}
        response = api_client.post(URL, body, format="json")
        assert response.json()["error"]["message"] == f"{name}: required"


def test_an_encrypted_private_key_is_refused_with_a_hint(api_client, direct):
    encrypted = asyncssh.generate_private_key("ssh-ed25519").export_private_key("pkcs8-pem", passphrase="pw").decode()
    response = api_client.post(URL, dict(direct, privateKey=encrypted), format="json")
    assert response.status_code == 400
    assert "remove the passphrase" in response.json()["error"]["message"]


def test_names_are_unique_per_account(api_client, other_api_client, direct):
    assert api_client.post(URL, direct, format="json").status_code == 201
    assert api_client.post(URL, direct, format="json").status_code == 409
    assert other_api_client.post(URL, direct, format="json").status_code == 201


def test_other_accounts_hosts_are_invisible(api_client, other_api_client, direct):
    host_id = api_client.post(URL, direct, format="json").json()["id"]
    assert other_api_client.get(URL).json()["sshHosts"] == []
    for method in ("get", "patch", "delete"):
        assert getattr(other_api_client, method)(f"{URL}/{host_id}", {}, format="json").status_code == 404
    tunnel = dict(direct, displayName="sneaky", port=None, connectionType="tunnel", jumpHostId=host_id)
    response = other_api_client.post(URL, tunnel, format="json")
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("jumpHostId: ")


@pytest.fixture
def admin_client(client, account):
    user = get_user_model().objects.create_user("alice", password="pw", is_staff=True)
    Membership.objects.create(user=user, account=account, role=Membership.Role.ADMIN)
    client.force_login(user)
    return client


def test_the_admin_takes_a_private_key_and_never_shows_it(admin_client, account, client_key, server_key):
    form = {"account": account.pk, "display_name": "web-1", "connection_type": "direct", "hostname": "web-1",
            "port": "22", "jump_host": "", "tunnel_port": "", "username": "deploy",
            "private_key": client_key[0], "host_key": server_key}
    response = admin_client.post("/admin/plugins_app/sshhost/add/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    host = SshHost.objects.get()
    assert host.public_key == client_key[1]
    page = admin_client.get(f"/admin/plugins_app/sshhost/{host.pk}/change/").content.decode()
    assert client_key[1].split()[1] in page              # the public half is shown
    assert secret_body(client_key[0]) not in page
    # A form that fails validation does not echo the key back either.
    failed = admin_client.post("/admin/plugins_app/sshhost/add/", dict(form, display_name="web-2", port="0"))
    assert failed.status_code == 200
    assert secret_body(client_key[0]) not in failed.content.decode()
    assert SshHost.objects.count() == 1


def test_the_admin_reports_a_bad_host_key_on_its_field(admin_client, account, client_key):
    form = {"account": account.pk, "display_name": "web-1", "connection_type": "direct", "hostname": "web-1",
            "port": "22", "username": "deploy", "private_key": client_key[0], "host_key": "nonsense"}
    response = admin_client.post("/admin/plugins_app/sshhost/add/", form)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["host_key"]
    assert not SshHost.objects.exists()

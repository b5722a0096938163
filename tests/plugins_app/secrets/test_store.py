"""Secrets at rest: encrypted (no plaintext in the database file), rotated, checked, logged without values."""

import sqlite3
from dataclasses import replace
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from plugins_app.models import AccountChange, Secret
from plugins_app.services.secrets import store
from plugins_app.services.secrets.hosts import Target, normalize_hosts, target_allowed

pytestmark = pytest.mark.django_db

VALUE = "sk-live-5f1e0c2a9b7d4e3f8a6c"


@pytest.mark.django_db(transaction=True)   # committed, so a backup of the database can read it
def test_the_database_file_holds_no_plaintext(account, tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("reads a SQLite file")
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["api.example.com"])
    connection.ensure_connection()
    copy = sqlite3.connect(tmp_path / "dump.sqlite3")
    connection.connection.backup(copy)   # the test database, written out as a file
    copy.close()
    data = (tmp_path / "dump.sqlite3").read_bytes()
    assert b"TOKEN" in data and b"api.example.com" in data   # the row is there...
    assert VALUE.encode() not in data                        # ...its value is not
    dump = "\n".join(connection.connection.iterdump())       # nor in an SQL dump (blobs as hex)
    assert "TOKEN" in dump and VALUE not in dump and VALUE.encode().hex() not in dump.lower()
    assert Secret.objects.get(account=account, name="TOKEN").value() == VALUE


def test_rotation_re_encrypts_and_keeps_secrets_usable(account, settings):
    settings.HUB_SECRETS = replace(settings.HUB_SECRETS, key="old-key-0123456789")
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["api.example.com"])
    before = bytes(Secret.objects.get(name="TOKEN").value_encrypted)
    # A new primary key, the old one kept as a fallback: still readable before rotation.
    settings.HUB_SECRETS = replace(settings.HUB_SECRETS, key="new-key-9876543210", key_fallbacks=("old-key-0123456789",))
    assert Secret.objects.get(name="TOKEN").value() == VALUE
    out = StringIO()
    call_command("rotate_secrets_key", stdout=out)
    assert "re-encrypted 1 secret" in out.getvalue()
    after = Secret.objects.get(name="TOKEN")
    assert bytes(after.value_encrypted) != before
    # Without the fallback, only the rotated value still decrypts.
    settings.HUB_SECRETS = replace(settings.HUB_SECRETS, key_fallbacks=())
    assert after.value() == VALUE
    stale = Secret(account=account, name="STALE", value_encrypted=before)
    with pytest.raises(ValueError, match="cannot be decrypted"):
        stale.value()


def test_ssh_and_secrets_keys_are_kept_apart(account):
    # The same operator secret derives different keys per store: an SSH key's token is no secret's.
    from cryptography.fernet import InvalidToken

    from plugins_app.models.secrets import secret_cipher
    from plugins_app.models.ssh import key_cipher
    token = key_cipher().encrypt(VALUE.encode())
    with pytest.raises(InvalidToken):
        secret_cipher().decrypt(token)


def test_the_change_log_records_set_rotate_update_delete_without_the_value(account):
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["api.example.com"], description="ticketing")
    store.set_secret(account, "TOKEN", value=VALUE + "-2")
    store.set_secret(account, "TOKEN", allowed_hosts=["*.example.com"])
    store.set_secret(account, "TOKEN", allowed_hosts=["*.example.com"])   # no change: no row
    store.delete_secret(account, "TOKEN")
    rows = list(AccountChange.objects.filter(account=account).order_by("id"))
    assert [r.action for r in rows] == ["secret_set", "secret_rotate", "secret_update", "secret_delete"]
    assert rows[2].before == {"allowedHosts": ["api.example.com"], "description": "ticketing"}
    assert rows[2].after == {"allowedHosts": ["*.example.com"], "description": "ticketing"}
    assert VALUE not in repr([(r.summary, r.before, r.after) for r in rows])


@pytest.mark.parametrize("entries, message", [
    ([], "non-empty"),
    ("api.example.com", "non-empty array"),
    (["https://api.example.com/"], "no path"),
    (["ftp://api.example.com"], "https .* or http"),
    (["api.example.com:0"], "port must be"),
    (["api.example.com:65536"], "port must be"),
    (["[::1]x"], "address.:port"),
    (["*.com"], "two labels"),
    (["api.*.example.com"], "leading"),
    (["exa mple.com"], "not a host name"),
    ([""], "non-empty host"),
    ([f"h{i}.example.com" for i in range(21)], "at most 20"),
])
def test_bad_hosts_are_refused(entries, message):
    with pytest.raises(ValueError, match=message):
        normalize_hosts(entries)


def host_allowed(host, allowed):
    return target_allowed(Target("https", host, 443), allowed)


def test_hosts_match_exactly_or_as_subdomains_of_a_wildcard():
    allowed = normalize_hosts(["API.Example.com.", "*.slack.com", "[::1]", "https://127.0.0.1:443"])
    assert allowed == ["api.example.com", "*.slack.com", "::1", "127.0.0.1"]
    assert host_allowed("api.example.com", allowed) and host_allowed("API.EXAMPLE.COM.", allowed)
    assert host_allowed("hooks.slack.com", allowed) and host_allowed("a.b.slack.com", allowed)
    assert not host_allowed("slack.com", allowed)            # *.suffix is for subdomains only
    assert not host_allowed("evilslack.com", allowed)
    assert not host_allowed("example.com", allowed) and not host_allowed("x.api.example.com", allowed)
    assert host_allowed("::1", allowed) and host_allowed("127.0.0.1", allowed)
    assert not host_allowed("127.0.0.2", allowed)


def test_an_entry_binds_a_scheme_and_a_port_https_and_443_unless_it_says_otherwise():
    allowed = normalize_hosts(["api.example.com", "HTTP://127.0.0.1:8080", "*.slack.com:8443", "http://[::1]"])
    assert allowed == ["api.example.com", "http://127.0.0.1:8080", "https://*.slack.com:8443", "http://[::1]:80"]
    assert target_allowed(Target("https", "api.example.com", 443), allowed)
    assert not target_allowed(Target("http", "api.example.com", 443), allowed)     # not over plain http
    assert not target_allowed(Target("https", "api.example.com", 8443), allowed)   # nor to another port
    assert not target_allowed(Target("http", "api.example.com", 80), allowed)
    assert target_allowed(Target("http", "127.0.0.1", 8080), allowed)
    assert not target_allowed(Target("http", "127.0.0.1", 8081), allowed)
    assert not target_allowed(Target("https", "127.0.0.1", 8080), allowed)
    assert target_allowed(Target("https", "hooks.slack.com", 8443), allowed)
    assert not target_allowed(Target("https", "hooks.slack.com", 443), allowed)
    assert target_allowed(Target("http", "::1", 80), allowed) and not target_allowed(Target("https", "::1", 443), allowed)

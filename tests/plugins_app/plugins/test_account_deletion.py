"""Deleting an account takes everything it owns: its own plugins with their installations, versions,
chains, stored keys and recorded calls, its SSH hosts (jump hosts included). What other accounts own,
and the official plugins, stay; and a plugin or jump host still in use cannot be deleted on its own."""

import pytest
from django.db.models import RestrictedError
from django.utils import timezone

from accounts.models import Account
from plugins_app.models import ChainEntry, Installation, KvEntry, Plugin, PluginVersion, RecordedCall, SshHost
from plugins_app.services.plugins import catalog, installations

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db


def _host(account, name, jump=None):
    return SshHost.objects.create(
        account=account, display_name=name, hostname="127.0.0.1", port=None if jump else 22, username="ops",
        connection_type=SshHost.ConnectionType.TUNNEL if jump else SshHost.ConnectionType.DIRECT,
        jump_host=jump, tunnel_port=22 if jump else None, private_key_encrypted=b"sealed")


def _owned_by(account) -> dict:
    return {
        "plugins": Plugin.objects.filter(account=account).count(),
        "installations": Installation.objects.filter(account=account).count(),
        "versions": PluginVersion.objects.filter(installation__account=account).count(),
        "chain entries": ChainEntry.objects.filter(account=account).count(),
        "kv": KvEntry.objects.filter(account=account).count(),
        "recorded calls": RecordedCall.objects.filter(account=account).count(),
        "ssh hosts": SshHost.objects.filter(account=account).count(),
    }


def _furnish(account, install):
    own = install(appender("-a"), target=account)
    official = installations.install_existing(account, Plugin.objects.filter(account=None).first())
    KvEntry.objects.create(account=account, installation=own, key="k", value="1", size=2, updated_at=timezone.now())
    RecordedCall.objects.create(account=account, hook="systemPrompt", context=PROMPT, outcome="unchanged",
                                created_at=timezone.now())
    _host(account, "tunnelled", jump=_host(account, "bastion"))
    return own, official


def test_an_account_with_installations_and_hosts_is_deleted_with_all_it_owns(account, other_account, install):
    catalog.sync_catalog()
    _furnish(account, install)
    _furnish(other_account, install)
    before = _owned_by(other_account)
    officials = Plugin.objects.filter(account=None).count()
    assert all(before.values()), before   # each kind is there, so its absence below means something

    Account.objects.filter(pk=account.pk).delete()

    assert _owned_by(account) == dict.fromkeys(before, 0)
    assert _owned_by(other_account) == before
    assert Plugin.objects.filter(account=None).count() == officials


def test_an_installed_plugin_and_a_jump_host_in_use_cannot_be_deleted_alone(account, install):
    catalog.sync_catalog()
    own, official = _furnish(account, install)
    with pytest.raises(RestrictedError):
        own.plugin.delete()
    with pytest.raises(RestrictedError):
        official.plugin.delete()
    with pytest.raises(RestrictedError):
        SshHost.objects.get(display_name="bastion").delete()
    assert _owned_by(account)["installations"] == 2 and _owned_by(account)["ssh hosts"] == 2

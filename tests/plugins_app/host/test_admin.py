"""Admin pages of the host surface: the write-only platform secret, agents, plugin logs, scoping."""

from dataclasses import replace

import pytest
from django.urls import reverse

from accounts import services
from plugins_app.models import Agent, PlatformConfig, PluginLog, WorkspaceFile

from .stubs import reporter

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-test-password"
SECRET = "the-platform-signing-secret"


@pytest.fixture
def admin_client(client, account):
    services.add_member(account.name, "alice", "admin", password=PASSWORD)
    assert client.login(username="alice", password=PASSWORD)
    return client


def test_the_platform_secret_is_write_only(admin_client, account):
    add = admin_client.post(reverse("admin:plugins_app_platformconfig_add"),
                            {"account": account.pk, "base_url": "https://127.0.0.1/hub", "signing_secret": SECRET})
    assert add.status_code == 302, add.content.decode()[:2000]
    config = PlatformConfig.objects.get(account=account)
    assert config.signing_secret == SECRET
    page = admin_client.get(reverse("admin:plugins_app_platformconfig_change", args=[config.pk])).content.decode()
    assert SECRET not in page
    # Saving with the secret left empty keeps it.
    change = admin_client.post(reverse("admin:plugins_app_platformconfig_change", args=[config.pk]),
                               {"base_url": "https://127.0.0.1/other", "signing_secret": ""})
    assert change.status_code == 302
    config.refresh_from_db()
    assert (config.base_url, config.signing_secret) == ("https://127.0.0.1/other", SECRET)


def test_a_bad_base_url_is_a_form_error(admin_client, account):
    response = admin_client.post(reverse("admin:plugins_app_platformconfig_add"),
                                 {"account": account.pk, "base_url": "ftp://127.0.0.1", "signing_secret": "s"})
    assert response.status_code == 200
    assert "http:// or https://" in response.content.decode()
    assert not PlatformConfig.objects.exists()


def test_the_admin_form_refuses_a_host_outside_the_allow_list_and_a_missing_secret(admin_client, account, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, platform_allowed_hosts=["10.0.0.0/8"])
    page = admin_client.post(reverse("admin:plugins_app_platformconfig_add"),
                             {"account": account.pk, "base_url": "http://127.0.0.1:9/hub", "signing_secret": "s"})
    assert "HUB_PLATFORM_ALLOWED_HOSTS" in page.content.decode()
    settings.HUB_HOST = replace(settings.HUB_HOST, platform_allowed_hosts=["127.0.0.1"])
    page = admin_client.post(reverse("admin:plugins_app_platformconfig_add"),
                             {"account": account.pk, "base_url": "http://127.0.0.1:9/hub", "signing_secret": ""})
    assert "a signing secret is required" in page.content.decode()
    assert not PlatformConfig.objects.exists()


def test_an_agent_may_only_belong_to_a_plugin_installed_in_its_account(admin_client, account, other_account, install):
    mine = install(reporter("systemPrompt", "1"), name="mine")
    theirs = install(reporter("systemPrompt", "1"), name="theirs", target=other_account)
    url = reverse("admin:plugins_app_agent_add")
    page = admin_client.get(url).content.decode()
    assert "mine" in page and "theirs" not in page
    refused = admin_client.post(url, {"account": account.pk, "agent_id": "5", "name": "A", "plugin": theirs.plugin_id})
    assert refused.status_code == 200 and not Agent.objects.exists()
    added = admin_client.post(url, {"account": account.pk, "agent_id": "5", "name": "A", "plugin": mine.plugin_id})
    assert added.status_code == 302
    assert Agent.objects.get().plugin == mine.plugin


def test_logs_and_workspace_files_are_scoped_to_the_users_accounts(admin_client, account, other_account):
    PluginLog.objects.create(account=account, plugin_slug="p", hook="systemPrompt", level="info", message="ours")
    PluginLog.objects.create(account=other_account, plugin_slug="p", hook="systemPrompt", level="info",
                             message="not ours")
    WorkspaceFile.objects.create(account=other_account, agent_id="1", path="their.txt", content="x", size=1)
    logs = admin_client.get(reverse("admin:plugins_app_pluginlog_changelist")).content.decode()
    assert "ours" in logs and "not ours" not in logs
    files = admin_client.get(reverse("admin:plugins_app_workspacefile_changelist")).content.decode()
    assert "their.txt" not in files
    theirs = PluginLog.objects.get(message="not ours")
    assert admin_client.get(reverse("admin:plugins_app_pluginlog_change", args=[theirs.pk])).status_code == 404

"""Each role against each admin page: operators see everything, account admins their accounts,
auditors only the audit trails and read-only, and another account's objects answer 404."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from accounts import services
from accounts.models import ApiKey, Membership
from plugins_app.models import CancelLog, ChainEntry, HandlerWarning, Plugin, UsageDaily
from plugins_app.services.plugins import installations as plugins

from ..admin_support import PASSWORD
from ..conftest import appender

pytestmark = pytest.mark.django_db

ADMIN_MODELS = ["accounts.account", "accounts.apikey", "accounts.membership", "plugins_app.plugin",
                "plugins_app.installation", "plugins_app.chainentry"]
AUDIT_MODELS = ["plugins_app.cancellog", "plugins_app.handlerwarning", "plugins_app.usagedaily"]


def rows_of(account, marker):
    """One row of every model of the admin, in `account`, each recognisable by `marker`."""
    # Stored as compiled: these tests never run it, and compiling every time is slow.
    plugin = Plugin.objects.create(account=account, name=f"{marker} plugin", slug=f"{marker}-plugin",
                                   language="javascript", source=appender(marker), compiled_js=appender(marker),
                                   code_hash="0" * 64, hooks=["systemPrompt"])
    installation = plugins.install_existing(account, plugin)
    key, _ = ApiKey.issue(account, name=f"{marker} key")
    return {
        "accounts.account": account,
        "accounts.apikey": key,
        "accounts.membership": Membership.objects.filter(account=account).first(),
        "plugins_app.plugin": installation.plugin,
        "plugins_app.installation": installation,
        "plugins_app.chainentry": ChainEntry.objects.get(installation=installation),
        "plugins_app.cancellog": CancelLog.objects.create(account=account, hook="systemPrompt",
                                                          plugin_slug=f"{marker}-cancel", reason=f"{marker} reason",
                                                          context={}),
        "plugins_app.handlerwarning": HandlerWarning.objects.create(account=account, hook="systemPrompt",
                                                                    plugin_slug=f"{marker}-warn", kind="error",
                                                                    message=f"{marker} warning"),
        "plugins_app.usagedaily": UsageDaily.objects.create(account=account, plugin_slug=f"{marker}-usage",
                                                            hook="systemPrompt", day="2026-01-01", runs=3),
    }


@pytest.fixture
def world(account, other_account, fast_passwords):
    services.add_member(account.name, "alice", "admin", password=PASSWORD)
    services.add_member(account.name, "audrey", "auditor", password=PASSWORD)
    services.add_member(other_account.name, "gina", "admin", password=PASSWORD)
    get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    return {"mine": rows_of(account, "acmeish"), "theirs": rows_of(other_account, "globexish"),
            "account": account, "other": other_account}


def url(model, view, *args):
    app, name = model.split(".")
    return reverse(f"admin:{app}_{name}_{view}", args=args)


def changelist(model, world, who):
    if model == "plugins_app.chainentry":   # the chain page always names one account's one hook
        account = world["other"] if who == "gina" else world["account"]
        return url(model, "changelist") + f"?account={account.pk}&hook=systemPrompt"
    return url(model, "changelist")


def as_user(client, username):
    client.logout()
    assert client.login(username=username, password=PASSWORD)
    return client


# (model group, user) -> (changelist status, status of the own account's object, of the other's)
EXPECTED = {
    ("admin", "root"): (200, 200, 200),
    ("admin", "alice"): (200, 200, 404),
    ("admin", "audrey"): (403, 404, 404),
    ("admin", "gina"): (200, 404, 200),
    ("audit", "root"): (200, 200, 200),
    ("audit", "alice"): (200, 200, 404),
    ("audit", "audrey"): (200, 200, 404),
    ("audit", "gina"): (200, 404, 200),
}


@pytest.mark.parametrize("who", ["root", "alice", "audrey", "gina"])
@pytest.mark.parametrize("model", ADMIN_MODELS + AUDIT_MODELS)
def test_each_role_against_each_page(client, world, model, who):
    group = "audit" if model in AUDIT_MODELS else "admin"
    list_status, mine_status, theirs_status = EXPECTED[(group, who)]
    as_user(client, who)
    listing = client.get(changelist(model, world, who))
    assert listing.status_code == list_status
    if list_status == 200:
        page = listing.content.decode()
        if who == "alice" or who == "audrey":
            assert "globexish" not in page and "globex" not in page.replace("globexish", "")
        if who == "gina":
            assert "acmeish" not in page

    mine, theirs = world["mine"][model], world["theirs"][model]
    assert client.get(url(model, "change", mine.pk)).status_code == mine_status
    assert client.get(url(model, "change", theirs.pk)).status_code == theirs_status
    assert client.get(url(model, "history", theirs.pk)).status_code == theirs_status
    # A guessed id that exists nowhere answers like another account's.
    if who != "root":
        assert client.get(url(model, "change", 987654)).status_code == 404


@pytest.mark.parametrize("who", ["alice", "audrey", "gina"])
@pytest.mark.parametrize("model", ADMIN_MODELS + AUDIT_MODELS)
def test_nobody_changes_or_deletes_another_accounts_rows(client, world, model, who):
    as_user(client, who)
    target = world["theirs" if who != "gina" else "mine"][model]
    before = type(target).objects.filter(pk=target.pk).values().get()
    change = client.post(url(model, "change", target.pk), {"name": "stolen", "enabled": "", "reason": "x"})
    delete = client.post(url(model, "delete", target.pk), {"post": "yes"})
    assert change.status_code in (403, 404) and delete.status_code in (403, 404)
    assert type(target).objects.filter(pk=target.pk).values().get() == before


@pytest.mark.parametrize("model", AUDIT_MODELS)
def test_auditors_have_no_add_change_or_delete(client, world, model):
    as_user(client, "audrey")
    mine = world["mine"][model]
    page = client.get(url(model, "changelist")).content.decode()
    assert url(model, "add") not in page
    assert 'name="action"' not in page   # no bulk actions (delete_selected) either
    detail = client.get(url(model, "change", mine.pk)).content.decode()
    assert 'name="_save"' not in detail and url(model, "delete", mine.pk) not in detail
    assert client.get(url(model, "add")).status_code == 403
    assert client.post(url(model, "change", mine.pk), {}).status_code == 403
    assert client.post(url(model, "delete", mine.pk), {"post": "yes"}).status_code == 403
    assert type(mine).objects.filter(pk=mine.pk).exists()


@pytest.mark.parametrize("who, visible, hidden", [
    ("audrey", ["Cancel log", "Handler warnings", "Usage"], ["Installations", "API keys", "Memberships",
                                                             "Chain entries", "Accounts"]),
    ("alice", ["Cancel log", "Installations", "API keys", "Memberships", "Chain entries", "Plugins"], []),
])
def test_the_index_lists_what_the_role_may_open(client, world, who, visible, hidden):
    as_user(client, who)
    page = client.get(reverse("admin:index")).content.decode()
    for name in visible:
        assert f">{name}</a>" in page
    for name in hidden:
        assert f">{name}</a>" not in page


def test_a_user_without_membership_sees_nothing(client, world):
    get_user_model().objects.create_user("stray", password=PASSWORD, is_staff=True)
    as_user(client, "stray")
    index = client.get(reverse("admin:index"))
    assert index.status_code == 200
    assert "Cancel log" not in index.content.decode()
    for model in ADMIN_MODELS + AUDIT_MODELS:
        assert client.get(url(model, "changelist")).status_code == 403


@pytest.mark.parametrize("model, roles_allowed", [
    ("accounts.account", {"root"}),
    ("accounts.apikey", {"root", "alice"}),
    ("accounts.membership", {"root", "alice"}),
    ("plugins_app.installation", {"root", "alice"}),
    ("plugins_app.plugin", set()),
    ("plugins_app.chainentry", set()),
    ("plugins_app.cancellog", set()),
])
def test_add_pages_per_role(client, world, model, roles_allowed):
    for who in ("root", "alice", "audrey"):
        as_user(client, who)
        assert client.get(url(model, "add")).status_code == (200 if who in roles_allowed else 403), who


def test_official_plugins_are_visible_to_account_admins_but_not_changeable(client, world):
    official = Plugin.objects.create(account=None, name="Official", slug="official", source="x", compiled_js="x",
                                     code_hash="0" * 64, hooks=["systemPrompt"])
    as_user(client, "alice")
    assert client.get(url("plugins_app.plugin", "change", official.pk)).status_code == 200
    assert "Official" in client.get(url("plugins_app.plugin", "changelist")).content.decode()
    client.post(url("plugins_app.plugin", "change", official.pk), {"name": "Hijacked"})
    official.refresh_from_db()
    assert official.name == "Official"
    as_user(client, "audrey")
    assert client.get(url("plugins_app.plugin", "change", official.pk)).status_code == 403


def test_account_admins_add_existing_users_by_username_only(client, world):
    services.add_member("acme-labs", "alice", "admin")
    services.add_member("acme-labs", "newcomer", "auditor")   # addable: a member of another account of alice's
    as_user(client, "alice")
    add = url("accounts.membership", "add")
    page = client.get(add).content.decode()
    assert 'name="username"' in page and "gina" not in page and "root" not in page

    missing = client.post(add, {"account": world["account"].pk, "username": "nobody", "role": "auditor"})
    assert "there is no user" in missing.content.decode()
    twice = client.post(add, {"account": world["account"].pk, "username": "audrey", "role": "admin"})
    assert "already a member" in twice.content.decode()
    elsewhere = client.post(add, {"account": world["other"].pk, "username": "newcomer", "role": "admin"})
    assert elsewhere.status_code == 200
    assert not Membership.objects.filter(user__username="newcomer", account=world["other"]).exists()

    added = client.post(add, {"account": world["account"].pk, "username": "newcomer", "role": "auditor"})
    assert added.status_code == 302
    assert Membership.objects.get(user__username="newcomer", account=world["account"]).role == "auditor"
    assert Membership.objects.get(user__username="audrey").role == "auditor"


def test_account_admins_cannot_demote_or_remove_themselves(client, world):
    own = Membership.objects.get(user__username="alice")
    as_user(client, "alice")
    assert client.post(url("accounts.membership", "change", own.pk), {"role": "auditor"}).status_code == 403
    assert client.post(url("accounts.membership", "delete", own.pk), {"post": "yes"}).status_code == 403
    own.refresh_from_db()
    assert own.role == "admin"


def test_auditors_cannot_open_ssh_hosts_or_their_secrets(client, world):
    """SSH hosts are configuration, not audit trail: auditors don't see them at all (and the page
    never renders the decrypted key to anyone)."""
    from plugins_app.models import SshHost

    host = SshHost(account=world["account"], display_name="web", hostname="web.example", username="deploy",
                   connection_type="direct", port=22)
    host.set_private_key("-----BEGIN OPENSSH PRIVATE KEY-----\nTOP-SECRET-KEY-MATERIAL\n")
    host.save()
    as_user(client, "audrey")
    response = client.get(url("plugins_app.sshhost", "change", host.pk))
    assert response.status_code in (403, 404)
    assert "TOP-SECRET-KEY-MATERIAL" not in response.content.decode()
    assert client.get(url("plugins_app.sshhost", "changelist")).status_code == 403
    as_user(client, "alice")
    page = client.get(url("plugins_app.sshhost", "change", host.pk)).content.decode()
    assert "web.example" in page
    assert "TOP-SECRET-KEY-MATERIAL" not in page


def test_ssh_turns_are_scoped_through_their_host(client, world):
    from plugins_app.models import SshHost, SshTurn

    turns = {}
    for key, account in (("mine", world["account"]), ("theirs", world["other"])):
        host = SshHost(account=account, display_name=f"{key}-host", hostname=f"{key}.example", username="u",
                       connection_type="direct", port=22)
        host.set_private_key("k")
        host.save()
        turns[key] = SshTurn.objects.create(ssh_host=host, session_id=f"{key}-session", turn_id="t",
                                            state="refused", cancellation={"reason": f"{key} refusal"})
    as_user(client, "alice")
    page = client.get(url("plugins_app.sshturn", "changelist")).content.decode()
    assert "mine-session" in page and "theirs-session" not in page
    assert "mine refusal" in client.get(url("plugins_app.sshturn", "change", turns["mine"].pk)).content.decode()
    assert client.get(url("plugins_app.sshturn", "change", turns["theirs"].pk)).status_code == 404
    assert client.post(url("plugins_app.sshturn", "change", turns["mine"].pk), {"state": "open"}).status_code == 403
    as_user(client, "audrey")
    assert client.get(url("plugins_app.sshturn", "changelist")).status_code == 403

"""The create_api_key and add_member management commands."""
import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIRequestFactory

from accounts.authentication import ApiKeyAuthentication
from accounts.models import Account, ApiKey, Membership

pytestmark = pytest.mark.django_db

PASSWORD = "Tr0ub4dor-and-3-horses"


def _run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue()


def test_create_api_key_creates_account_and_prints_a_working_key_last():
    output = _run("create_api_key", "newco", "--name", "ci")

    raw = output.strip().splitlines()[-1]
    account = Account.objects.get(name="newco")
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Bearer {raw}")
    principal, api_key = ApiKeyAuthentication().authenticate(request)
    assert principal.account == account
    assert api_key.name == "ci"


def test_create_api_key_reuses_existing_account(account):
    first = _run("create_api_key", "acme").strip().splitlines()[-1]
    second = _run("create_api_key", "acme").strip().splitlines()[-1]

    assert first != second
    assert Account.objects.filter(name="acme").count() == 1
    assert account.api_keys.count() == 2


def test_create_api_key_rejects_blank_account_name():
    with pytest.raises(CommandError):
        _run("create_api_key", "   ")
    assert not Account.objects.exists()


def test_add_member_creates_staff_user_with_role():
    _run("add_member", "acme", "alice", "--role", "admin", "--password", PASSWORD)

    user = get_user_model().objects.get(username="alice")
    assert user.is_staff and not user.is_superuser
    assert user.check_password(PASSWORD)
    membership = Membership.objects.get(user=user)
    assert membership.account.name == "acme"
    assert membership.role == "admin"


def test_add_member_again_changes_role_without_duplicating(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO())
    _run("add_member", "acme", "alice", "--role", "admin", "--password", PASSWORD)
    _run("add_member", "acme", "alice", "--role", "auditor")

    user = get_user_model().objects.get(username="alice")
    assert get_user_model().objects.filter(username="alice").count() == 1
    assert list(Membership.objects.filter(user=user).values_list("role", flat=True)) == ["auditor"]
    assert user.check_password(PASSWORD)


def test_add_member_to_second_account_keeps_first_membership():
    _run("add_member", "acme", "alice", "--role", "admin", "--password", PASSWORD)
    _run("add_member", "globex", "alice", "--role", "auditor")

    roles = dict(Membership.objects.values_list("account__name", "role"))
    assert roles == {"acme": "admin", "globex": "auditor"}


def test_add_member_new_user_without_password_or_terminal_fails(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO())
    with pytest.raises(CommandError, match="--password"):
        _run("add_member", "acme", "bob", "--role", "auditor")
    assert not get_user_model().objects.filter(username="bob").exists()


def test_add_member_prompts_for_password_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Terminal())
    monkeypatch.setattr("getpass.getpass", lambda prompt="": PASSWORD)
    _run("add_member", "acme", "carol", "--role", "auditor")

    assert get_user_model().objects.get(username="carol").check_password(PASSWORD)


def test_add_member_rejects_weak_password():
    with pytest.raises(CommandError):
        _run("add_member", "acme", "dave", "--role", "admin", "--password", "123")
    assert not get_user_model().objects.filter(username="dave").exists()


def test_add_member_rejects_unknown_role():
    with pytest.raises(CommandError):
        _run("add_member", "acme", "erin", "--role", "owner", "--password", PASSWORD)
    assert not Membership.objects.exists()


def test_add_member_makes_an_existing_non_staff_user_staff():
    get_user_model().objects.create_user("frank", password=PASSWORD)
    _run("add_member", "acme", "frank", "--role", "auditor")
    assert get_user_model().objects.get(username="frank").is_staff


def test_api_key_fixture_authenticates_for_its_account(api_key, account):
    assert ApiKey.lookup(api_key).account == account

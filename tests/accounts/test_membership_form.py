"""The admin's add-member form: an account admin adds only members of their other accounts, and
learns nothing about any other username."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from accounts import services
from accounts.models import Membership

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-test-password"
ADD = reverse("admin:accounts_membership_add")


@pytest.fixture
def alice(client, settings, account):
    """Administers acme and acme-labs; audits globex."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    services.add_member(account.name, "alice", "admin", password=PASSWORD)
    services.add_member("acme-labs", "alice", "admin")
    services.add_member("globex", "alice", "auditor")
    assert client.login(username="alice", password=PASSWORD)
    return client


def add(client, account, username, role="auditor"):
    return client.post(ADD, {"account": account.pk, "username": username, "role": role})


def error_of(response) -> str:
    assert response.status_code == 200
    return response.context["adminform"].form.errors["username"][0]


def test_a_member_of_another_administered_account_can_be_added(alice, account):
    services.add_member("acme-labs", "lab-tech", "auditor")
    assert add(alice, account, "lab-tech").status_code == 302
    assert Membership.objects.get(user__username="lab-tech", account=account).role == "auditor"


def test_unknown_and_disallowed_usernames_get_the_same_answer(alice, account):
    user_model = get_user_model()
    user_model.objects.create_user("loner", is_staff=True)                           # in no account
    user_model.objects.create_superuser("root", "root@example.com", PASSWORD)        # an operator
    services.add_member("acme-labs", "op", "admin")
    user_model.objects.filter(username="op").update(is_superuser=True)               # an operator in my account
    services.add_member("globex", "stranger", "admin")                               # in an account I only audit
    services.add_member("initech", "outsider", "auditor")                            # in someone else's account
    services.add_member("acme-labs", "gone", "auditor")
    user_model.objects.filter(username="gone").update(is_active=False)

    answers = {name: error_of(add(alice, account, name))
               for name in ["nobody", "loner", "root", "op", "stranger", "outsider", "gone"]}

    assert {name: answer.replace(repr(name), "NAME") for name, answer in answers.items()} == dict.fromkeys(
        answers, "there is no user NAME you can add: you can add members of your other accounts; an operator "
                 "adds anyone else with manage.py add_member")
    assert Membership.objects.filter(account=account).count() == 1   # alice alone


def test_a_user_already_in_the_account_is_told_so(alice, account):
    services.add_member(account.name, "audrey", "auditor")
    assert "already a member" in error_of(add(alice, account, "audrey", "admin"))
    assert Membership.objects.get(user__username="audrey", account=account).role == "auditor"

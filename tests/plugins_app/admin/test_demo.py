"""`manage.py load_demo`: the demo account with its two logins, plugins, audit rows and a key."""

import io
import re

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from accounts.models import Account, ApiKey, Membership
from plugins_app.models import CancelLog, Installation, UsageDaily

pytestmark = pytest.mark.django_db


def load_demo(monkeypatch, password="a-demo-password"):
    monkeypatch.setenv("DEMO_PASSWORD", password)
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    return out.getvalue()


def test_load_demo_creates_logins_plugins_and_a_working_key(monkeypatch, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    output = load_demo(monkeypatch)
    account = Account.objects.get(name="demo")
    roles = dict(Membership.objects.filter(account=account).values_list("user__username", "role"))
    assert roles == {"demo-admin": "admin", "demo-auditor": "auditor"}
    for username in roles:
        user = authenticate(username=username, password="a-demo-password")
        assert user is not None and user.is_staff and not user.is_superuser
        assert f"{username} / a-demo-password" in output

    names = set(Installation.objects.filter(account=account).values_list("plugin__name", flat=True))
    assert {"Polite prompt", "Cron sentinel", "Caveman", "Card mask", "rm guard"} == names
    assert CancelLog.objects.filter(account=account, plugin_slug="rm-guard").count() == 1
    assert UsageDaily.objects.filter(account=account).exists()

    raw_key = re.search(r"API key:\s+(mh_\S+)", output).group(1)
    assert ApiKey.lookup(raw_key).account == account


def test_load_demo_is_idempotent_and_leaves_one_live_key(monkeypatch, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    first = re.search(r"API key:\s+(mh_\S+)", load_demo(monkeypatch)).group(1)
    second_output = load_demo(monkeypatch, password="another-password")
    second = re.search(r"API key:\s+(mh_\S+)", second_output).group(1)
    account = Account.objects.get(name="demo")
    assert Account.objects.filter(name="demo").count() == 1
    assert Installation.objects.filter(account=account).count() == 5
    assert CancelLog.objects.filter(account=account).count() == 1
    assert ApiKey.lookup(first) is None and ApiKey.lookup(second) is not None
    assert authenticate(username="demo-admin", password="another-password") is not None

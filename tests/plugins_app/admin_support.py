"""Helpers shared by the admin tests: logging in as a member of an account with a role."""

import pytest
from django.contrib.auth import get_user_model

from accounts import services

PASSWORD = "a-long-test-password"


@pytest.fixture
def fast_passwords(settings):
    # PBKDF2 costs ~0.2 s per hash; these tests log many users in and don't test hashing.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def login(client, fast_passwords):
    """login(account_name, username, role) -> the test client, logged in as that member."""
    def do(account_name, username, role):
        services.add_member(account_name, username, role, password=PASSWORD)
        client.logout()
        assert client.login(username=username, password=PASSWORD)
        return client
    return do


@pytest.fixture
def operator_client(client, db, fast_passwords):
    get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    assert client.login(username="root", password=PASSWORD)
    return client

"""ApiKey issue, lookup, revocation and last-used bookkeeping."""
import hashlib
import re

import pytest

from accounts.models import ApiKey

pytestmark = pytest.mark.django_db

KEY_PATTERN = re.compile(r"^mh_([A-Za-z0-9]{8})_[A-Za-z0-9]{32}$")


def test_issue_returns_well_formed_key_and_stores_only_its_hash(account):
    api_key, raw = ApiKey.issue(account, name="ci")

    match = KEY_PATTERN.match(raw)
    assert match, raw
    stored = ApiKey.objects.get(pk=api_key.pk)
    assert stored.prefix == match.group(1)
    assert stored.hashed == hashlib.sha256(raw.encode()).hexdigest()
    assert stored.name == "ci" and stored.account == account and stored.is_active
    secret = raw.rsplit("_", 1)[1]
    row = ApiKey.objects.filter(pk=api_key.pk).values().get()
    assert not any(secret in str(value) for value in row.values())


def test_issued_keys_are_distinct(account):
    raws = {ApiKey.issue(account)[1] for _ in range(20)}
    assert len(raws) == 20
    assert ApiKey.objects.values("prefix").distinct().count() == 20


def test_lookup_finds_key_with_its_account_loaded(account, django_assert_num_queries):
    api_key, raw = ApiKey.issue(account)

    with django_assert_num_queries(1):
        found = ApiKey.lookup(raw)
        assert found.account.name == "acme"
    assert found.pk == api_key.pk


def test_lookup_rejects_revoked_key(account):
    api_key, raw = ApiKey.issue(account)
    api_key.revoke()
    assert ApiKey.lookup(raw) is None


def test_lookup_rejects_wrong_secret_with_right_prefix(account):
    _, raw = ApiKey.issue(account)
    last = raw[-1]
    tampered = raw[:-1] + ("a" if last != "a" else "b")
    assert ApiKey.lookup(tampered) is None
    assert ApiKey.lookup(raw) is not None


@pytest.mark.parametrize(
    "candidate",
    ["", "mh_", "not-a-key", None, 42, "mh_short_secret", "mh_abcdefgh_" + "x" * 31, "mh_abc_defgh_" + "x" * 32],
)
def test_lookup_rejects_malformed_input(account, candidate):
    ApiKey.issue(account)
    assert ApiKey.lookup(candidate) is None


def test_lookup_rejects_other_scheme_with_valid_prefix_and_secret(account):
    _, raw = ApiKey.issue(account)
    assert ApiKey.lookup("xx" + raw[2:]) is None


def test_revoke_is_idempotent_and_keeps_first_timestamp(account):
    api_key, _ = ApiKey.issue(account)
    api_key.revoke()
    first = ApiKey.objects.get(pk=api_key.pk).revoked_at
    assert first is not None and not api_key.is_active

    api_key.revoke()
    assert ApiKey.objects.get(pk=api_key.pk).revoked_at == first


def test_queryset_revoke_counts_only_active_keys(account, other_account):
    kept, _ = ApiKey.issue(other_account)
    already, _ = ApiKey.issue(account)
    already.revoke()
    ApiKey.issue(account)
    ApiKey.issue(account)

    assert ApiKey.objects.filter(account=account).revoke() == 2
    assert not ApiKey.objects.filter(account=account).active().exists()
    assert ApiKey.objects.get(pk=kept.pk).is_active


def test_existing_key_cannot_get_a_new_secret(account):
    api_key, _ = ApiKey.issue(account)
    with pytest.raises(ValueError):
        api_key.save_with_new_secret()

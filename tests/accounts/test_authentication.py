"""ApiKeyAuthentication and HasAccountKey through a test-only DRF view.

The view lives in this module's own URLconf so these tests do not depend on the
plugins API's endpoints.
"""
import pytest
from django.urls import path
from rest_framework.response import Response
from rest_framework.test import APIClient
from rest_framework.views import APIView

from accounts.key_use import recorder as key_use
from accounts.models import ApiKey
from accounts.permissions import HasAccountKey


class WhoAmI(APIView):
    permission_classes = [HasAccountKey]

    def get(self, request):
        return Response({"account": request.user.account.name, "key": request.auth.prefix})


urlpatterns = [path("whoami", WhoAmI.as_view())]

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]


def _get(authorization=None):
    client = APIClient()
    if authorization is not None:
        client.credentials(HTTP_AUTHORIZATION=authorization)
    return client.get("/whoami")


def test_missing_key_is_401_with_bearer_challenge(account):
    response = _get()
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'


def test_unknown_key_is_401(account):
    response = _get("Bearer mh_AAAAAAAA_" + "B" * 32)
    assert response.status_code == 401
    assert "invalid or revoked API key" in response.content.decode()


def test_wrong_secret_is_401(api_key):
    response = _get(f"Bearer {api_key[:-1]}{'a' if api_key[-1] != 'a' else 'b'}")
    assert response.status_code == 401


def test_revoked_key_is_401(account):
    api_key, raw = ApiKey.issue(account)
    api_key.revoke()
    assert _get(f"Bearer {raw}").status_code == 401


@pytest.mark.parametrize("authorization", ["Bearer", "Bearer a b", "Bearer mh_ünïcode"])
def test_malformed_bearer_header_is_401(account, authorization):
    assert _get(authorization).status_code == 401


def test_other_scheme_is_treated_as_no_credentials(api_key):
    response = _get(f"Basic {api_key}")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'


def test_good_key_is_200_for_its_own_account(api_client, other_api_client):
    response = api_client.get("/whoami")
    assert response.status_code == 200
    assert response.json()["account"] == "acme"

    assert other_api_client.get("/whoami").json()["account"] == "globex"


def test_scheme_keyword_is_case_insensitive(api_key):
    assert _get(f"bearer {api_key}").status_code == 200


def test_successful_requests_record_last_use_once_per_minute(account, django_assert_num_queries):
    api_key, raw = ApiKey.issue(account)
    assert _get(f"Bearer {raw}").status_code == 200
    first_use = ApiKey.objects.get(pk=api_key.pk).last_used_at
    assert first_use is not None

    # Within the minute: only the key lookup, no UPDATE.
    with django_assert_num_queries(1):
        assert _get(f"Bearer {raw}").status_code == 200
    assert ApiKey.objects.get(pk=api_key.pk).last_used_at == first_use


def test_the_lookup_gives_what_the_orm_gives_in_one_statement(account, other_account, django_assert_num_queries):
    # accounts/key_lookup.py writes the statement itself: every field of the key and of its account
    # must come back as the ORM's queryset would give it (SQLite's datetimes are text until converted).
    api_key, raw = ApiKey.issue(account, name="ci")
    ApiKey.issue(other_account)
    _get(f"Bearer {raw}")   # a use noted and written: last_used_at is a datetime, not NULL
    key_use.flush()
    expected = ApiKey.objects.select_related("account").get(pk=api_key.pk)
    assert expected.last_used_at is not None
    with django_assert_num_queries(1):
        found = ApiKey.lookup(raw)
    assert found is not None and found.account is not None
    for model_instance, orm in ((found, expected), (found.account, expected.account)):
        for field in type(orm)._meta.concrete_fields:
            assert getattr(model_instance, field.attname) == getattr(orm, field.attname), field.name
        assert not model_instance._state.adding and model_instance._state.db == "default"
    assert found.account.name == account.name and found.account.pk != other_account.pk
    account.name = "renamed"
    account.save()
    assert ApiKey.lookup(raw).account.name == "renamed"   # nothing of the account kept between calls
    assert ApiKey.lookup(raw[:-1] + ("a" if raw[-1] != "a" else "b")) is None
    api_key.revoke()
    assert ApiKey.lookup(raw) is None

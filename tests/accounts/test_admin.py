"""Admin pages for API keys: issuing shows the raw key once, and bulk revocation."""
import re

import pytest
from django.urls import reverse

from accounts.models import ApiKey

pytestmark = pytest.mark.django_db


def test_adding_a_key_shows_the_raw_key_once(admin_client, account):
    response = admin_client.post(
        reverse("admin:accounts_apikey_add"), {"account": account.pk, "name": "from admin"}, follow=True
    )
    assert response.status_code == 200

    raws = re.findall(r"mh_[A-Za-z0-9]{8}_[A-Za-z0-9]{32}", response.content.decode())
    assert len(raws) == 1
    api_key = ApiKey.lookup(raws[0])
    assert api_key is not None and api_key.account == account and api_key.name == "from admin"

    change_page = admin_client.get(reverse("admin:accounts_apikey_change", args=[api_key.pk]))
    assert change_page.status_code == 200
    assert raws[0] not in change_page.content.decode()
    assert api_key.prefix in change_page.content.decode()


def test_revoke_action_revokes_selected_keys_only(admin_client, account):
    chosen, chosen_raw = ApiKey.issue(account, name="chosen")
    spared, spared_raw = ApiKey.issue(account, name="spared")

    response = admin_client.post(
        reverse("admin:accounts_apikey_changelist"),
        {"action": "revoke_selected", "_selected_action": [chosen.pk]},
    )
    assert response.status_code == 302
    assert ApiKey.lookup(chosen_raw) is None
    assert ApiKey.lookup(spared_raw) is not None


def test_root_redirects_to_admin(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:index")

"""A catalog settings schema may mark a setting as naming a secret (format secretName): the value is
checked to be a name, and setting it grants that secret to the installation."""

import json
from dataclasses import replace

import pytest

from plugins_app.errors import InvalidInput
from plugins_app.services.plugins import chains
from plugins_app.services.plugins import settings as plugin_settings
from plugins_app.services.secrets import store

from ..conftest import PROMPT
from ..host.stubs import StubServer, execute, reporter

pytestmark = pytest.mark.django_db

SCHEMA = {"tokenSecret": {"type": "string", "format": "secretName", "default": "",
                          "description": "The secret holding the API token."}}
VALUE = "ref-9b2c4d6e8f0a1b3c"


def test_the_schema_takes_secret_name_and_checks_values():
    plugin_settings.check_schema("demo", SCHEMA)
    assert plugin_settings.clean_patch("demo", SCHEMA, {"tokenSecret": "API_TOKEN"}) == {"tokenSecret": "API_TOKEN"}
    with pytest.raises(InvalidInput, match="name of one of the account's secrets"):
        plugin_settings.clean_patch("demo", SCHEMA, {"tokenSecret": "xoxb-a-real-token"})
    assert plugin_settings.secret_references(SCHEMA, {"tokenSecret": "API_TOKEN"}) == ["API_TOKEN"]
    assert plugin_settings.secret_references(SCHEMA, {"tokenSecret": ""}) == []


def test_a_setting_naming_a_secret_grants_it(api_client, account, install, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)
    site = StubServer(lambda req: (200, {}, (req.headers.get("Authorization") or "").encode()))
    try:
        store.set_secret(account, "API_TOKEN", value=VALUE, allowed_hosts=[site.url])
        source = reporter("systemPrompt", f"host.fetch({site.url!r}, {{headers: {{Authorization: "
                                          "'Bearer {{secret.' + host.config.tokenSecret + '}}'}}).then((r) => r.text())")
        installation = install(source, grant=["host:fetch"])
        assert installation.plugin.permissions == ["host:fetch"]   # the name is not in the source
        installation.settings = {"tokenSecret": "API_TOKEN"}   # plain settings grant nothing
        installation.save(update_fields=["settings"])
        chains.mark_changed(account.pk)
        refused = json.loads(execute(api_client, "systemPrompt", PROMPT)["value"])
        assert "needs the secret:API_TOKEN permission" in refused["error"] and site.requests == []
        # As an official plugin's schema would say; the admin's choice of the setting is the grant.
        installation.plugin.settings_schema = SCHEMA
        installation.plugin.save(update_fields=["settings_schema"])
        chains.mark_changed(account.pk)
        answer = json.loads(execute(api_client, "systemPrompt", PROMPT)["value"])
        assert answer == {"ok": "Bearer [secret API_TOKEN]"}
        assert site.requests[-1].headers["Authorization"] == f"Bearer {VALUE}"
    finally:
        site.close()

"""Installing from the admin: review of hooks and permissions, inline compile errors, enabling and
granting without losing chain places, uninstalling."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from plugins_app.models import ChainEntry, Installation, Plugin
from plugins_app.services.plugins import catalog
from plugins_app.services.plugins import installations as plugins

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

ADD = reverse("admin:plugins_app_installation_add")
CATALOG = reverse("admin:plugins_app_installation_catalog")
TS = """const SUFFIX: string = " (checked)";
globalThis.middleware.systemPrompt = async (context) => {
  await host.fetch("https://example.com/");
  return context.systemPrompt + SUFFIX;
};
globalThis.middleware.todoAdded = async (context, tools) => context.texts;
"""


def form(account, **changes):
    return {"account": account.pk, "name": "Checker", "description": "", "language": "typescript",
            "source": TS, "reviewed": "", **changes}


def reviewed_digest(response):
    return response.context["form"].data["reviewed"]


def test_checking_shows_hooks_and_permissions_and_saves_nothing(login, account):
    client = login(account.name, "alice", "admin")
    response = client.post(ADD, {**form(account), "_check": "1"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "systemPrompt" in page and "todoAdded" in page
    assert "host.fetch" in page
    assert 'name="grant" value="host:fetch"' in page
    assert 'name="_install"' in page
    assert not Plugin.objects.exists() and not Installation.objects.exists()


def test_installing_after_review_grants_what_was_ticked_and_appends_to_chains(login, account, install):
    first = install(appender("1"))
    client = login(account.name, "alice", "admin")
    checked = client.post(ADD, {**form(account), "_check": "1"})
    response = client.post(ADD, {**form(account, reviewed=reviewed_digest(checked), grant=["host:fetch"]),
                                 "_install": "1"})
    assert response.status_code == 302
    installation = Installation.objects.get(plugin__name="Checker")
    assert response["Location"] == reverse("admin:plugins_app_installation_change", args=[installation.pk])
    assert installation.account == account
    assert installation.granted_permissions == ["host:fetch"]
    assert installation.plugin.hooks == ["systemPrompt", "todoAdded"]
    chain = [e.installation_id for e in ChainEntry.objects.filter(account=account, hook="systemPrompt")]
    assert chain == [first.pk, installation.pk]


def test_install_without_a_review_of_this_exact_source_only_shows_the_review(login, account):
    client = login(account.name, "alice", "admin")
    checked = client.post(ADD, {**form(account), "_check": "1"})
    edited = TS.replace("(checked)", "(edited)")
    response = client.post(ADD, {**form(account, source=edited, reviewed=reviewed_digest(checked)), "_install": "1"})
    assert response.status_code == 200
    assert "source changed since it was checked" in response.content.decode()
    assert not Installation.objects.exists()
    # The review now covers the edited source.
    again = client.post(ADD, {**form(account, source=edited, reviewed=reviewed_digest(response)), "_install": "1"})
    assert again.status_code == 302
    assert "(edited)" in Plugin.objects.get().source


def test_a_compile_error_is_shown_on_the_source_with_line_and_column(login, account):
    client = login(account.name, "alice", "admin")
    broken = "const a = 1;\nglobalThis.middleware.systemPrompt = async (c) => {\n  return c.systemPrompt +;\n};"
    response = client.post(ADD, {**form(account, source=broken), "_check": "1"})
    assert response.status_code == 200
    errors = response.context["form"].errors["source"]
    assert errors[0].startswith("line 3, column ")
    excerpt = response.context["compile_errors"][0]["excerpt"]
    assert excerpt.splitlines()[0] == "3 |   return c.systemPrompt +;"
    caret_column = excerpt.splitlines()[1].index("^") - len("3 | ") + 1
    assert caret_column == response.context["compile_errors"][0]["column"]
    assert 'name="_install"' not in response.content.decode()
    # Forcing an install of broken code installs nothing either.
    forced = client.post(ADD, {**form(account, source=broken), "_install": "1"})
    assert forced.status_code == 200 and "errornote" in forced.content.decode()
    assert not Plugin.objects.exists() and not Installation.objects.exists()


def test_an_uploaded_file_replaces_the_source_and_sets_the_language(login, account):
    client = login(account.name, "alice", "admin")
    upload = SimpleUploadedFile("append.js", appender(" uploaded").encode(), content_type="text/javascript")
    response = client.post(ADD, {**form(account, source="", language="typescript"), "upload": upload,
                                 "_check": "1"})
    assert response.status_code == 200
    data = response.context["form"].data
    assert data["language"] == "javascript" and "uploaded" in data["source"]
    done = client.post(ADD, {**form(account, source=data["source"], language="javascript",
                                    reviewed=data["reviewed"]), "_install": "1"})
    assert done.status_code == 302
    assert Plugin.objects.get().language == "javascript"


def test_a_name_already_used_in_the_account_is_a_field_error(login, account, install):
    install(appender("x"), name="Checker")
    client = login(account.name, "alice", "admin")
    checked = client.post(ADD, {**form(account), "_check": "1"})
    response = client.post(ADD, {**form(account, reviewed=reviewed_digest(checked)), "_install": "1"})
    assert response.status_code == 200
    assert "already installed" in str(response.context["form"].errors["name"])
    assert Installation.objects.count() == 1


def test_only_administered_accounts_can_be_installed_into(login, account, other_account):
    client = login(account.name, "alice", "admin")
    response = client.post(ADD, {**form(other_account), "_check": "1"})
    assert "account" in response.context["form"].errors
    assert not Plugin.objects.exists()


def test_an_auditor_cannot_open_the_install_page(login, account):
    client = login(account.name, "audrey", "auditor")
    assert client.get(ADD).status_code == 403
    assert client.post(ADD, {**form(account), "_install": "1"}).status_code == 403
    assert not Plugin.objects.exists()


def change_form(installation, settings="{}", **changes):
    """The change page posted in its JSON view (the form view is tested in test_admin_settings_form)."""
    return {"enabled": "on" if installation.enabled else "", "granted_permissions": installation.granted_permissions,
            "settings_mode": "json", "settings_json": settings, **changes}


def test_disabling_keeps_the_chain_place_and_stops_the_handler(login, account, install, api_client):
    first, second, third = install(appender("1")), install(appender("2")), install(appender("3"))
    client = login(account.name, "alice", "admin")
    url = reverse("admin:plugins_app_installation_change", args=[second.pk])
    assert client.post(url, change_form(second, enabled="")).status_code == 302
    second.refresh_from_db()
    assert second.enabled is False
    execute = lambda: api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT},
                                      format="json").json()["value"]
    assert execute() == "base13"

    assert client.post(url, change_form(second, enabled="on")).status_code == 302
    order = list(ChainEntry.objects.filter(account=account, hook="systemPrompt").values_list("installation", flat=True))
    assert order == [first.pk, second.pk, third.pk]
    assert execute() == "base123"


def test_disable_action_affects_only_selected_installations(login, account, install):
    first, second = install(appender("1")), install(appender("2"))
    client = login(account.name, "alice", "admin")
    response = client.post(reverse("admin:plugins_app_installation_changelist"),
                           {"action": "disable_selected", "_selected_action": [first.pk]})
    assert response.status_code == 302
    first.refresh_from_db(), second.refresh_from_db()
    assert (first.enabled, second.enabled) == (False, True)


def test_granting_changes_what_the_next_execute_sees(login, account, install, api_client):
    source = ("globalThis.middleware.systemPrompt = async (c) => {\n"
              "  try { await host.fetch('http://127.0.0.1:9/'); } catch (e) { return c.systemPrompt + ' ' + e.message; }\n"
              "  return c.systemPrompt; };")
    installation = install(source)
    assert installation.plugin.permissions == ["host:fetch"]
    client = login(account.name, "alice", "admin")
    url = reverse("admin:plugins_app_installation_change", args=[installation.pk])
    before = api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json").json()
    assert "needs the host:fetch permission" in before["value"]

    response = client.post(url, change_form(installation, granted_permissions=["host:fetch"]))
    assert response.status_code == 302
    installation.refresh_from_db()
    assert installation.granted_permissions == ["host:fetch"]
    after = api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json").json()
    assert "needs the host:fetch permission" not in after["value"]


@pytest.fixture
def greeter(db):
    """An official plugin with a settings schema, as the catalog stores one."""
    source = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' ' + host.config.greeting;"
    return Plugin.objects.create(account=None, name="Greeter", slug="greeter", language="javascript",
                                 settings_schema={"greeting": {"type": "string", "default": "hello",
                                                               "description": "What to add."},
                                                  "shout": {"type": "boolean", "default": False}},
                                 **plugins.compile_source(source, "javascript"))


def test_settings_are_validated_against_the_schema_and_reach_the_next_execute(login, account, greeter, api_client):
    installation = catalog.install_official(account, "greeter")
    client = login(account.name, "alice", "admin")
    url = reverse("admin:plugins_app_installation_change", args=[installation.pk])
    page = client.get(url).content.decode()
    assert "What to add." in page   # the schema is shown next to the settings
    execute = lambda: api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT},
                                      format="json").json()["value"]
    assert execute() == "base hello"

    bad = client.post(url, change_form(installation, settings='{"greeting": 5}'))
    assert bad.status_code == 200 and "settings_json" in bad.context["adminform"].form.errors
    unknown = client.post(url, change_form(installation, settings='{"colour": "red"}'))
    assert "has no such setting" in str(unknown.context["adminform"].form.errors["settings_json"])
    installation.refresh_from_db()
    assert installation.settings == {"greeting": "hello", "shout": False}

    assert client.post(url, change_form(installation, settings='{"greeting": "bonjour", "shout": true}')).status_code == 302
    assert execute() == "base bonjour"
    # A setting left out of the edited object goes back to its default.
    assert client.post(url, change_form(installation, settings='{"shout": true}')).status_code == 302
    installation.refresh_from_db()
    assert installation.settings == {"greeting": "hello", "shout": True}


def test_the_catalog_page_installs_an_official_plugin_with_settings(login, account, other_account, greeter):
    client = login(account.name, "alice", "admin")
    page = client.get(CATALOG)
    assert page.status_code == 200 and "Greeter" in page.content.decode()
    detail = reverse("admin:plugins_app_installation_catalog_detail", args=["greeter"])
    assert f'href="{detail}"' in page.content.decode()
    as_json = {"settings_mode": "json"}
    refused = client.post(detail, {"account": other_account.pk, "settings_json": "{}", **as_json})
    assert refused.status_code == 200 and not Installation.objects.exists()
    wrong = client.post(detail, {"account": account.pk, "settings_json": '{"greeting": []}', **as_json})
    assert wrong.status_code == 200 and "greeting: expected a string" in wrong.content.decode()
    assert "Greeter was not installed" in wrong.content.decode()
    assert not Installation.objects.exists()

    done = client.post(detail, {"account": account.pk, "settings_json": '{"greeting": "hi"}', **as_json})
    assert done.status_code == 302
    installation = Installation.objects.get()
    assert (installation.account, installation.plugin, installation.settings) == (
        account, greeter, {"greeting": "hi", "shout": False})
    # Installed: the card says so and opens the installation; the account is no longer a choice.
    card = client.get(CATALOG).content.decode()
    assert "Installed" in card and reverse("admin:plugins_app_installation_change", args=[installation.pk]) in card
    assert "Every account you administer has it already" in client.get(detail).content.decode()
    again = client.post(detail, {"account": account.pk, "settings_json": "{}", **as_json})
    assert again.status_code == 200 and "Greeter was not installed" in again.content.decode()
    assert "Every account you administer has it already" in again.content.decode()
    assert Installation.objects.count() == 1


def test_auditors_cannot_open_the_catalog_page(login, account, greeter):
    client = login(account.name, "audrey", "auditor")
    assert client.get(CATALOG).status_code == 403
    detail = reverse("admin:plugins_app_installation_catalog_detail", args=["greeter"])
    assert client.get(detail).status_code == 403
    assert client.post(detail, {"account": account.pk}).status_code == 403
    assert not Installation.objects.exists()


@pytest.mark.parametrize("changes, field", [
    ({"granted_permissions": ["host:llm"]}, "granted_permissions"),
    ({"settings": "[1, 2]"}, "settings_json"),
    ({"settings": "{not json"}, "settings_json"),
    ({"settings": '{"mode": "strict"}'}, "settings_json"),   # a custom plugin takes no settings
])
def test_bad_changes_are_field_errors_and_change_nothing(login, account, install, changes, field):
    installation = install(appender("1"))
    client = login(account.name, "alice", "admin")
    url = reverse("admin:plugins_app_installation_change", args=[installation.pk])
    response = client.post(url, change_form(installation, **changes))
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    installation.refresh_from_db()
    assert installation.granted_permissions == [] and installation.settings == {}


def test_deleting_an_installation_uninstalls_it(login, account, install):
    installation = install(appender("1"))
    plugin_id = installation.plugin_id
    client = login(account.name, "alice", "admin")
    url = reverse("admin:plugins_app_installation_delete", args=[installation.pk])
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not Installation.objects.filter(pk=installation.pk).exists()
    assert not ChainEntry.objects.filter(installation_id=installation.pk).exists()
    assert not Plugin.objects.filter(pk=plugin_id).exists()   # a custom plugin goes with its last installation


def test_the_change_page_shows_hooks_chain_places_and_source(login, account, install):
    install(appender("1"))
    installation = plugins.install_plugin(account, name="Two hooks", source=TS, language="typescript")
    client = login(account.name, "alice", "admin")
    page = client.get(reverse("admin:plugins_app_installation_change", args=[installation.pk])).content.decode()
    assert "systemPrompt #2" in page and "todoAdded #1" in page
    assert "const SUFFIX: string" in page
    assert 'value="host:fetch"' in page


def test_an_installations_page_offers_no_save_and_add_another(login, account, install):
    # Issue 33: an installation comes from the install pages, never from a blank form.
    installation = install(appender("1"))
    client = login(account.name, "alice", "admin")
    page = client.get(reverse("admin:plugins_app_installation_change", args=[installation.pk])).content.decode()
    assert 'name="_save"' in page and 'name="_continue"' in page
    assert 'name="_addanother"' not in page


def test_the_install_page_checks_types_by_default_and_marks_a_type_error(login, account):
    client = login(account.name, "alice", "admin")
    page = client.get(ADD)
    assert page.context["form"]["typecheck"].value() is True   # ticked when the page opens
    typo = "globalThis.middleware.systemPrompt = async (c) => {\n  return c.txet;\n};"
    checked = client.post(ADD, {**form(account, source=typo, language="typescript"), "typecheck": "on",
                                "_check": "1"})
    error = checked.context["compile_errors"][0]
    assert (error["line"], error["column"]) == (2, typo.splitlines()[1].index("txet") + 1)
    assert "SystemPromptContext" in error["message"] and 'name="_install"' not in checked.content.decode()
    unticked = client.post(ADD, {**form(account, source=typo, language="typescript"), "_check": "1"})
    assert 'name="_install"' in unticked.content.decode()   # only transpiled, as before


def test_the_review_ticks_what_the_code_needs_and_the_message_says_what_fails_without_it(login, account):
    # Issue 44 item 6: the review offers each permission with the calls that need it, ticked; an install
    # that leaves one out says which calls fail until it is granted, instead of "it now runs".
    client = login(account.name, "alice", "admin")
    checked = client.post(ADD, {**form(account), "_check": "1"})
    assert checked.context["form"].data.getlist("grant") == ["host:fetch"]
    page = checked.content.decode()
    assert "Permissions it needs" in page and "host:fetch: for host.fetch" in page
    assert 'value="host:fetch"\n' not in page and "checked" in page.split('value="host:fetch"')[1][:40]
    # "Check again" keeps the admin's choice: unticked stays unticked.
    again = client.post(ADD, {**form(account, reviewed=reviewed_digest(checked)), "_check": "1"})
    assert again.context["form"].data.getlist("grant") == []
    installed = client.post(ADD, {**form(account, reviewed=reviewed_digest(checked)), "_install": "1"}, follow=True)
    text = [str(m) for m in installed.context["messages"]]
    assert len(text) == 1 and "not granted host:fetch (host.fetch)" in text[0]
    assert "fail until you grant" in text[0] and "now runs" not in text[0]
    assert Installation.objects.get(plugin__name="Checker").granted_permissions == []


def test_an_install_with_everything_granted_says_it_runs(login, account):
    client = login(account.name, "alice", "admin")
    checked = client.post(ADD, {**form(account), "_check": "1"})
    installed = client.post(ADD, {**form(account, reviewed=reviewed_digest(checked), grant=["host:fetch"]),
                                  "_install": "1"}, follow=True)
    text = [str(m) for m in installed.context["messages"]]
    assert text == [f"Installed Checker in {account} at the end of the systemPrompt, todoAdded chains: it runs "
                    "from the next call."]


def test_the_admin_form_s_crlf_source_is_stored_with_lf_and_hashes_as_the_api_s(login, account, other_account):
    """A browser posts a textarea's text with CRLF line endings: the hub keeps LF and one final newline, so
    the same code installed through the API has the same source and code hash."""
    client = login(account.name, "alice", "admin")
    crlf = TS.rstrip("\n").replace("\n", "\r\n")
    checked = client.post(ADD, {**form(account, source=crlf), "_check": "1"})
    response = client.post(ADD, {**form(account, source=crlf, reviewed=reviewed_digest(checked)), "_install": "1"})
    assert response.status_code == 302
    from_admin = Installation.objects.get(account=account)
    assert from_admin.plugin.source == TS
    from_api = plugins.install_plugin(other_account, name="Checker", source=TS.rstrip("\n"))
    assert from_api.plugin.source == TS
    assert from_api.plugin.code_hash == from_admin.plugin.code_hash == from_admin.versions.get().code_hash

"""The Versions page's draft editor and "Try this draft": a new draft starts from the live source (or a
chosen version's) in the code editor, a type error refuses it at its line, and the Try page runs a
chosen version in place of live code without changing what runs."""

import json

import pytest
from django.urls import reverse

from plugins_app.models import Installation, PluginVersion
from plugins_app.services.versions import releases as versions

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

TRY = reverse("admin:plugins_app_chainentry_try")
TYPED = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' typed';\n"


def history(installation, **query):
    url = reverse("admin:plugins_app_pluginversion_installation", args=[installation.pk])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def draft_url(installation):
    return reverse("admin:plugins_app_pluginversion_draft", args=[installation.pk])


def test_a_new_draft_starts_from_the_live_source_in_the_editor(login, install):
    plugin = install(appender("-v1"))
    versions.create_draft(plugin.account, plugin.pk, source=appender("-v2"), language="javascript")
    client = login("acme", "alice", "admin")
    page = client.get(history(plugin))
    form = page.context["draft_form"]
    # The live code as the hub keeps it (LF line endings and a final newline).
    assert form["source"].value() == appender("-v1") + "\n" and form["language"].value() == "javascript"
    assert form["typecheck"].value() is True
    html = page.content.decode()
    assert 'data-hub-editor="draft"' in html and 'id="hub-completions"' in html and 'id="hub-starters"' in html
    assert page.context["live_source"] == appender("-v1") + "\n" and 'id="hub-live-source"' in html
    assert 'class="button hub-try-draft"' in html and f"version_{plugin.pk}=2" in html
    chosen = client.get(history(plugin, **{"from": 2}))
    assert chosen.context["draft_form"]["source"].value() == appender("-v2") + "\n"


def test_a_type_error_in_a_typescript_draft_is_refused_at_its_line(login, install):
    plugin = install(TYPED, language="typescript")
    client = login("acme", "alice", "admin")
    source = TYPED + "globalThis.middleware.todoAdded = async (c) => c.txet;\n"
    response = client.post(draft_url(plugin), {"language": "typescript", "source": source, "typecheck": "on"})
    assert response.status_code == 200
    errors = json.loads(response.context["draft_form"].fields["source"].widget.attrs["data-errors"])
    assert errors[0]["line"] == 2 and errors[0]["column"] == source.splitlines()[1].index("txet") + 1
    assert "txet" in errors[0]["message"]
    assert PluginVersion.objects.filter(installation=plugin).count() == 1
    unchecked = client.post(draft_url(plugin), {"language": "typescript", "source": source})
    assert unchecked.status_code == 302   # the box unticked: only transpiled, as before
    assert PluginVersion.objects.filter(installation=plugin).count() == 2


def test_the_try_page_runs_a_chosen_draft_and_nothing_that_runs_changes(login, install, api_client):
    plugin = install(appender("-v1"))
    versions.create_draft(plugin.account, plugin.pk, source=appender("-v2"), language="javascript")
    client = login("acme", "alice", "admin")
    page = client.get(TRY, {"account": plugin.account_id, "hook": "systemPrompt", f"version_{plugin.pk}": "2"})
    assert page.context["form"][f"version_{plugin.pk}"].value() == "2"
    fields = {"account": plugin.account_id, "hook": "systemPrompt", f"version_{plugin.pk}": "2",
              **{f"ctx_{k}": v for k, v in PROMPT.items()}}
    run = client.post(TRY, fields).context["run"]
    assert run.after == "base-v2" and run.versions == {str(plugin.pk): 2}
    assert client.post(TRY, {**fields, f"version_{plugin.pk}": ""}).context["run"].after == "base-v1"
    executed = api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json").json()
    assert executed["value"] == "base-v1"
    assert Installation.objects.get(pk=plugin.pk).live_version == 1

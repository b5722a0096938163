"""Shadow mode in the admin: an admin shadows an installation or a draft and promotes it; the page shows
counts and examples; an auditor reads them but cannot change the mode or promote."""

import pytest
from django.urls import reverse

from plugins_app.models import Installation
from plugins_app.services.versions import releases as versions

pytestmark = pytest.mark.django_db

INBOUND = {"sessionId": "10", "channelId": None, "text": "rm -rf /", "mediaIds": []}
PASS = "globalThis.middleware.userMessageInbound = async (c) => c.text;"
VETO = "globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('no: ' + c.text);"


def page_url(installation):
    return reverse("admin:plugins_app_pluginversion_installation", args=[installation.pk])


def execute(api_client):
    return api_client.post("/api/v1/hooks/userMessageInbound/execute", {"context": INBOUND}, format="json").json()


def test_an_admin_shadows_a_draft_sees_what_it_would_veto_and_promotes_it(login, install, api_client, eager):
    guard = install(PASS, name="guard")
    versions.create_draft(guard.account, guard.pk, source=VETO, language="javascript")
    client = login("acme", "alice", "admin")
    client.post(reverse("admin:plugins_app_pluginversion_shadow", args=[guard.pk]), {"shadow_version": "2"})
    assert Installation.objects.get(pk=guard.pk).shadow_version == 2
    assert execute(api_client)["outcome"] == "unchanged"
    html = client.get(page_url(guard)).content.decode()
    assert 'class="would-cancel">1<' in html and "no: rm -rf /" in html and "Promote to live" in html
    client.post(reverse("admin:plugins_app_pluginversion_promote", args=[guard.pk]))
    installation = Installation.objects.get(pk=guard.pk)
    assert (installation.live_version, installation.shadow_version) == (2, None)
    assert execute(api_client)["outcome"] == "cancelled"


def test_an_auditor_reads_shadow_counts_but_cannot_change_them(login, install, api_client, eager):
    guard = install(VETO, name="guard")
    admin_client = login("acme", "alice", "admin")
    admin_client.post(reverse("admin:plugins_app_pluginversion_shadow", args=[guard.pk]), {"mode": "shadow"})
    execute(api_client)
    auditor = login("acme", "audrey", "auditor")
    html = auditor.get(page_url(guard)).content.decode()
    assert 'class="would-cancel">1<' in html and "hub-promote" not in html and "hub-shadow-draft" not in html
    assert auditor.post(reverse("admin:plugins_app_pluginversion_promote", args=[guard.pk])).status_code == 403
    assert auditor.post(reverse("admin:plugins_app_pluginversion_shadow", args=[guard.pk]),
                        {"mode": "live"}).status_code == 403
    assert Installation.objects.get(pk=guard.pk).mode == "shadow"


def test_a_bad_shadow_request_shows_an_error_and_changes_nothing(login, install):
    guard = install(PASS, name="guard")
    client = login("acme", "alice", "admin")
    response = client.post(reverse("admin:plugins_app_pluginversion_shadow", args=[guard.pk]),
                           {"shadow_version": "7"}, follow=True)
    assert "has no version 7" in response.content.decode()
    response = client.post(reverse("admin:plugins_app_pluginversion_promote", args=[guard.pk]), follow=True)
    assert "nothing in shadow" in response.content.decode()
    installation = Installation.objects.get(pk=guard.pk)
    assert (installation.mode, installation.shadow_version) == ("live", None)


def test_the_shadow_report_reads_as_a_person_would(login, install, api_client, eager):
    # Issue 33: "since" was a raw ISO timestamp, examples did not show their input, and nothing said that a
    # shadow run's outward calls are stood in.
    fetching_veto = ("globalThis.middleware.userMessageInbound = async (c, t) => "
                     "c.text === 'fetch' ? host.fetch('http://127.0.0.1:9/') : t.cancel('no: ' + c.text);")
    guard = install(fetching_veto, name="guard", grant=["host:fetch"])
    client = login("acme", "alice", "admin")
    client.post(reverse("admin:plugins_app_pluginversion_shadow", args=[guard.pk]), {"mode": "shadow"})
    execute(api_client)
    html = client.get(page_url(guard)).content.decode()
    counts = html.split('id="hub-shadow-counts"')[1].split("</table>")[0]
    since = counts.split("<tbody><tr><td>")[1].split("</td>")[0]
    assert "T" not in since.split('">', 1)[1] and "ago)" in since   # e.g. "Dec. 5, 2026, 9:06 a.m. (0 minutes ago)"
    cancels = html.split('id="hub-shadow-cancels"')[1].split("</ul>")[0]
    assert "on <code>rm -rf /</code>" in cancels
    stand_ins = html.split('id="hub-shadow-stand-ins"')[1].split("</p>")[0]
    assert "host.fetch" in stand_ins and "host.llm" not in stand_ins

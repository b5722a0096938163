"""Matchers in the admin: the installation page says them in words, the chain page shows them, the try page
explains a context (alone or beside a run), and the versions page diffs them."""

import pytest
from django.urls import reverse

from plugins_app.services.versions import releases

pytestmark = pytest.mark.django_db

TRY = reverse("admin:plugins_app_chainentry_try")
ONLY_AGENT_9 = ("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '!';\n"
                "globalThis.middleware.match = { systemPrompt: { agentId: { in: ['9'] } } };")
PROMPT_FIELDS = {"hook": "systemPrompt", "ctx_sessionId": "1", "ctx_agentId": "2", "ctx_sessionKind": "direct",
                 "ctx_systemPrompt": "base"}


def test_the_installation_page_says_the_matcher_in_words(login, account, install):
    installation = install(ONLY_AGENT_9, name="nine")
    page = login(account.name, "alice", "admin").get(reverse("admin:plugins_app_installation_change",
                                                             args=[installation.pk])).content.decode()
    assert "systemPrompt: runs when agentId is one of &quot;9&quot;" in page


def test_the_chain_page_shows_when_each_runs(login, account, install):
    install(ONLY_AGENT_9, name="nine")
    install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;", name="always")
    page = login(account.name, "alice", "admin").get(
        reverse("admin:plugins_app_chainentry_changelist"), {"account": account.pk, "hook": "systemPrompt"})
    text = page.content.decode()
    assert 'agentId is one of &quot;9&quot;' in text and "on every call" in text


def test_the_try_page_explains_without_running_and_beside_a_run(login, account, install):
    install(ONLY_AGENT_9, name="nine")
    client = login(account.name, "alice", "admin")
    only = client.post(TRY, {**PROMPT_FIELDS, "account": account.pk, "explain_only": "1"})
    assert only.status_code == 200
    assert only.context["run"] is None
    [step] = only.context["explained"]
    assert (step.plugin, step.runs, step.reason) == ("nine", False, "match")
    assert "Explain: 0 of 1 would run" in only.content.decode()
    ran = client.post(TRY, {**PROMPT_FIELDS, "account": account.pk})
    assert [s["status"] for s in ran.context["steps"]] == ["skipped"]
    assert ran.context["steps"][0]["reason"] == "match"
    assert ran.context["explained"][0].reason == "match"
    nine = client.post(TRY, {**PROMPT_FIELDS, "ctx_agentId": "9", "account": account.pk})
    assert [s["status"] for s in nine.context["steps"]] == ["ran"]
    assert nine.context["explained"][0].runs is True


def test_the_versions_page_diffs_the_matchers(login, account, install):
    installation = install(ONLY_AGENT_9, name="nine")
    releases.create_draft(account, installation.pk, source=ONLY_AGENT_9.replace("['9']", "['9', '10']"),
                          language="javascript")
    page = login(account.name, "alice", "admin").get(
        reverse("admin:plugins_app_pluginversion_installation", args=[installation.pk]), {"a": 1, "b": 2})
    assert page.status_code == 200
    diff = str(page.context["matcher_diff"])
    assert "<ins>" in diff and "10" in diff

"""The try-it page: each handler's status, duration, value before and after, warnings and the cancel
reason; and a try-run records nothing."""

import json

import pytest
from django.urls import reverse

from plugins_app.models import CancelLog, HandlerWarning, UsageDaily
from plugins_app.services.execution import tryit

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

TRY = reverse("admin:plugins_app_chainentry_try")
CANCEL_TODOS = ("globalThis.middleware.todoAdded = async (c, tools) => "
                "c.texts.length > 1 ? tools.cancel('too many todos') : c.texts;")


def plugin_logs_model():
    from plugins_app import models
    return getattr(models, "PluginLog", None)


def audit_counts():
    logs = plugin_logs_model()
    return (CancelLog.objects.count(), HandlerWarning.objects.count(), UsageDaily.objects.count(),
            logs.objects.count() if logs else 0)


def test_the_page_has_a_field_per_context_field_with_realistic_samples(login, account):
    client = login(account.name, "alice", "admin")
    response = client.get(TRY, {"hook": "todoAdded", "account": account.pk})
    assert response.status_code == 200
    form = response.context["form"]
    assert [f.name for f in form.context_fields()] == ["ctx_sessionId", "ctx_texts"]
    assert form["ctx_texts"].value() == "Check the backup logs\nDraft the incident summary"
    assert "example" not in response.content.decode()
    ssh = client.get(TRY, {"hook": "sshCommandSending", "account": account.pk}).context["form"]
    assert ssh["ctx_kind"].value() == "command" and ssh["ctx_command"].value() == "df -h /var"
    assert not ssh.fields["ctx_path"].required   # nullable: empty means null


def test_the_fields_run_the_chain_and_a_bad_field_is_marked(login, account, install):
    install(appender(" one"), name="One")
    client = login(account.name, "alice", "admin")
    fields = {"account": account.pk, "hook": "systemPrompt", "ctx_sessionId": "1", "ctx_agentId": "2",
              "ctx_sessionKind": "direct", "ctx_systemPrompt": "base"}
    response = client.post(TRY, fields)
    assert response.context["run"].after == "base one"
    page = response.content.decode()
    assert ">One</a>" in page                       # the plugin's name, not its slug
    assert 'id="tryit-total"' not in page           # one change: the step's diff says it all
    assert 'id="tryit-after"' in page
    bad = client.post(TRY, {**fields, "ctx_sessionId": "not-an-id"})
    assert bad.context["run"] is None
    assert bad.context["form"].errors["ctx_sessionId"]


def test_a_try_run_shows_each_handler_and_records_nothing(login, account, install):
    install(appender(" one"), name="One")
    install("globalThis.middleware.systemPrompt = async (c) => { host.log('info', 'broken on purpose'); "
            "throw new Error('kaput'); };", name="Broken")
    install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt.toUpperCase();", name="Loud")
    client = login(account.name, "alice", "admin")

    response = client.post(TRY, {"account": account.pk, "hook": "systemPrompt", "context": json.dumps(PROMPT)})
    assert response.status_code == 200
    run = response.context["run"]
    assert run.outcome == "changed"
    assert run.after == "BASE ONE"
    steps = response.context["steps"]
    assert [(s["plugin"], s["status"]) for s in steps] == [("one", "ran"), ("broken", "error"), ("loud", "ran")]
    assert all(s["duration_ms"] >= 0 for s in steps)
    assert "kaput" in steps[1]["warning"]
    assert steps[1]["logs"][0]["message"] == "broken on purpose"
    assert str(steps[0]["diff"]) == "base<ins> one</ins>"
    assert str(steps[2]["diff"]) == "<del>base</del><ins>BASE</ins> <del>one</del><ins>ONE</ins>"
    page = response.content.decode()
    assert "kaput" in page and "broken on purpose" in page
    assert audit_counts() == (0, 0, 0, 0)


def test_a_cancel_shows_the_reason_stops_the_chain_and_is_not_logged(login, account, install):
    install(CANCEL_TODOS, name="Limit")
    install("globalThis.middleware.todoAdded = async (c) => c.texts.concat(['never']);", name="After")
    client = login(account.name, "alice", "admin")
    context = {"sessionId": "5", "texts": ["a", "b"]}
    response = client.post(TRY, {"account": account.pk, "hook": "todoAdded", "context": json.dumps(context)})
    run = response.context["run"]
    assert run.outcome == "cancelled"
    assert (run.cancelled_by, run.cancel_reason) == ("limit", "too many todos")
    assert [s["plugin"] for s in response.context["steps"]] == ["limit"]
    page = response.content.decode()
    assert "too many todos" in page and "Cancelled by <strong>Limit</strong>" in page
    assert 'id="tryit-after"' not in page and 'id="tryit-total"' not in page
    assert audit_counts() == (0, 0, 0, 0)


def test_the_same_chain_through_execute_does_record(account, install, api_client):
    """The counterpart of the tests above: the rows a try-run skips are really written by execute."""
    install(CANCEL_TODOS, name="Limit")
    body = {"context": {"sessionId": "5", "texts": ["a", "b"]}}
    assert api_client.post("/api/v1/hooks/todoAdded/execute", body, format="json").json()["outcome"] == "cancelled"
    assert CancelLog.objects.count() == 1 and UsageDaily.objects.count() == 1


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON: line 1, column 2"),
    ("[1]", "expected a JSON object"),
    ('{"sessionId": "1", "agentId": "2", "sessionKind": "direct"}', "context.systemPrompt: missing"),
    ('{"sessionId": 1, "agentId": "2", "sessionKind": "direct", "systemPrompt": "x"}', "context.sessionId"),
])
def test_a_bad_context_is_a_field_error(login, account, install, text, message):
    install(appender("1"))
    client = login(account.name, "alice", "admin")
    response = client.post(TRY, {"account": account.pk, "hook": "systemPrompt", "context": text})
    assert response.context["run"] is None
    assert message in " ".join(response.context["form"].errors["context"])


def test_only_administered_accounts_can_be_tried(login, account, other_account, install):
    install(appender(" theirs"), target=other_account)
    client = login(account.name, "alice", "admin")
    response = client.post(TRY, {"account": other_account.pk, "hook": "systemPrompt", "context": json.dumps(PROMPT)})
    assert response.context["run"] is None
    assert "account" in response.context["form"].errors


def test_auditors_cannot_try_chains(login, account):
    client = login(account.name, "audrey", "auditor")
    assert client.get(TRY).status_code == 403
    assert client.post(TRY, {"account": account.pk, "hook": "systemPrompt",
                             "context": json.dumps(PROMPT)}).status_code == 403


def test_an_observe_only_hook_runs_and_reports_no_value(account, install):
    install("globalThis.middleware.cronJobCompleted = async (c) => { host.log('info', 'done ' + c.status); };")
    run = tryit.try_chain(account, "cronJobCompleted", {"cronJobId": "1", "cronJobRunId": "2", "sessionId": "3",
                                                        "agentId": "4", "status": "ok"})
    assert run.outcome == "unchanged" and run.after is None
    assert run.steps[0].trace.logs[0]["message"] == "done ok"

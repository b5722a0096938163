"""Auditors' pages: the cancel log's filters, search, detail and CSV export, warnings, and usage."""

import csv
import io
from datetime import UTC, date, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from plugins_app.admin.audit.usage import usage_chart
from plugins_app.models import CancelLog, HandlerWarning, UsageDaily

pytestmark = pytest.mark.django_db

CANCELS = reverse("admin:plugins_app_cancellog_changelist")
EXPORT = reverse("admin:plugins_app_cancellog_export")


def cancel(account, *, hook="todoAdded", plugin="limit", reason="too many", agent="", session="5",
           at=None, context=None):
    row = CancelLog.objects.create(account=account, hook=hook, plugin_slug=plugin, reason=reason,
                                   context=context or {"sessionId": session, "texts": ["a"]},
                                   agent_id=agent, session_id=session)
    if at is not None:
        CancelLog.objects.filter(pk=row.pk).update(created_at=at)   # the model refuses a second save
    return row


def listed(response):
    return {row.pk for row in response.context["cl"].result_list}


@pytest.fixture
def log(account, other_account):
    old = datetime(2026, 1, 10, 12, tzinfo=UTC)
    return {
        "todo": cancel(account, reason="too many todos", session="5", at=old),
        "ssh": cancel(account, hook="sshCommandSending", plugin="rm-guard", reason="refusing to delete /",
                      agent="77", session="6", context={"command": "rm -rf /"}),
        "prompt": cancel(account, hook="cronJobFiring", plugin="cron-sentinel", reason="=HYPERLINK(\"x\")",
                         agent="78", session=""),
        "theirs": cancel(other_account, reason="too many todos (theirs)"),
    }


@pytest.mark.parametrize("params, expected", [
    ({}, {"todo", "ssh", "prompt"}),
    ({"hook": "sshCommandSending"}, {"ssh"}),
    ({"plugin_slug": "limit"}, {"todo"}),
    ({"agent_id": "77"}, {"ssh"}),
    ({"session_id": "5"}, {"todo"}),
    ({"q": "refusing"}, {"ssh"}),
    ({"q": "todos"}, {"todo"}),
    ({"created_at__since": "2026-01-10", "created_at__until": "2026-01-10"}, {"todo"}),
    ({"created_at__until": "2026-01-09"}, set()),
    ({"created_at__since": "2026-01-11"}, {"ssh", "prompt"}),
])
def test_cancel_log_filters_and_search(login, account, log, params, expected):
    client = login(account.name, "audrey", "auditor")
    response = client.get(CANCELS, params)
    assert response.status_code == 200
    assert listed(response) == {log[name].pk for name in expected}


def test_a_bad_date_is_refused_not_ignored(login, account, log):
    client = login(account.name, "audrey", "auditor")
    response = client.get(CANCELS, {"created_at__since": "last tuesday"})
    assert response.status_code == 302 and "e=1" in response["Location"]
    assert client.get(EXPORT, {"created_at__since": "last tuesday"}).status_code == 400


def test_filters_offer_only_the_users_accounts_values(login, account, log, other_account):
    cancel(other_account, plugin="their-secret-plugin")
    client = login(account.name, "audrey", "auditor")
    page = client.get(CANCELS).content.decode()
    assert "their-secret-plugin" not in page
    assert "globex" not in page
    assert "(theirs)" not in page


def test_the_detail_page_shows_the_context_snapshot_read_only(login, account, log):
    client = login(account.name, "audrey", "auditor")
    url = reverse("admin:plugins_app_cancellog_change", args=[log["ssh"].pk])
    response = client.get(url)
    assert response.status_code == 200
    page = response.content.decode()
    assert '<pre class="hub-code">{\n  &quot;command&quot;: &quot;rm -rf /&quot;\n}</pre>' in page
    assert 'name="_save"' not in page and "deletelink" not in page
    assert client.post(url, {"reason": "rewritten"}).status_code == 403
    log["ssh"].refresh_from_db()
    assert log["ssh"].reason == "refusing to delete /"


def test_nobody_can_add_change_or_delete_cancel_log_rows(login, operator_client, account, log):
    url = reverse("admin:plugins_app_cancellog_change", args=[log["todo"].pk])
    delete = reverse("admin:plugins_app_cancellog_delete", args=[log["todo"].pk])
    for client in (login(account.name, "alice", "admin"), operator_client):
        assert client.get(reverse("admin:plugins_app_cancellog_add")).status_code == 403
        assert client.post(url, {"reason": "x"}).status_code == 403
        assert client.post(delete, {"post": "yes"}).status_code == 403
        response = client.post(CANCELS, {"action": "delete_selected", "_selected_action": [log["todo"].pk],
                                         "post": "yes"})
        assert response.status_code in (200, 302)
    assert CancelLog.objects.count() == 4


def read_csv(response):
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment;" in response["Content-Disposition"]
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_csv_export_follows_the_filters_and_the_scope(login, account, log):
    client = login(account.name, "audrey", "auditor")
    rows = read_csv(client.get(EXPORT, {"hook": "sshCommandSending"}))
    assert [r["id"] for r in rows] == [str(log["ssh"].pk)]
    assert rows[0]["reason"] == "refusing to delete /" and rows[0]["agent_id"] == "77"
    assert '"command": "rm -rf /"' in rows[0]["context"]

    everything = read_csv(client.get(EXPORT))
    assert {r["id"] for r in everything} == {str(log[n].pk) for n in ("todo", "ssh", "prompt")}
    searched = read_csv(client.get(EXPORT, {"q": "todos"}))
    assert [r["id"] for r in searched] == [str(log["todo"].pk)]


def test_csv_export_says_which_version_of_the_plugin_cancelled(login, account, log):
    # Issue 33: the export had no plugin-version column though every cancel row records it.
    CancelLog.objects.filter(pk=log["ssh"].pk).update(plugin_version=3)
    client = login(account.name, "audrey", "auditor")
    rows = {r["id"]: r for r in read_csv(client.get(EXPORT))}
    assert rows[str(log["ssh"].pk)]["plugin_version"] == "3"
    assert rows[str(log["todo"].pk)]["plugin_version"] == ""   # recorded before versions existed


def test_csv_cells_that_a_spreadsheet_would_run_are_defused(login, account, log):
    client = login(account.name, "audrey", "auditor")
    rows = read_csv(client.get(EXPORT, {"plugin_slug": "cron-sentinel"}))
    assert rows[0]["reason"] == "'=HYPERLINK(\"x\")"


def test_the_changelist_links_to_the_export_with_its_filters(login, account, log):
    client = login(account.name, "audrey", "auditor")
    page = client.get(CANCELS, {"hook": "todoAdded", "q": "todos"}).content.decode()
    assert f'href="{EXPORT}?hook=todoAdded&amp;q=todos"' in page


def test_handler_warnings_are_scoped_filtered_and_read_only(login, account, other_account):
    mine = HandlerWarning.objects.create(account=account, hook="systemPrompt", plugin_slug="slow",
                                         kind="timeout", message="exceeded 5 s")
    HandlerWarning.objects.create(account=account, hook="systemPrompt", plugin_slug="odd", kind="malformed",
                                  message="returned undefined")
    theirs = HandlerWarning.objects.create(account=other_account, hook="systemPrompt", plugin_slug="x",
                                           kind="timeout", message="theirs")
    client = login(account.name, "audrey", "auditor")
    changelist = reverse("admin:plugins_app_handlerwarning_changelist")
    assert listed(client.get(changelist, {"kind": "timeout"})) == {mine.pk}
    assert client.get(reverse("admin:plugins_app_handlerwarning_change", args=[theirs.pk])).status_code == 404
    assert client.post(reverse("admin:plugins_app_handlerwarning_change", args=[mine.pk]),
                       {"message": "x"}).status_code == 403


def usage(account, slug, hook, day, runs, ms):
    return UsageDaily.objects.create(account=account, plugin_slug=slug, hook=hook, day=day, runs=runs, total_ms=ms)


def test_usage_page_lists_runs_and_time_and_draws_the_last_30_days(login, account, other_account):
    today = timezone.localdate()
    usage(account, "caveman", "systemPrompt", today, 40, 120.0)
    usage(account, "card-mask", "userMessageInbound", today - timedelta(days=3), 10, 5.0)
    usage(account, "caveman", "systemPrompt", today - timedelta(days=45), 999, 1.0)   # outside the chart
    usage(other_account, "globex-only", "systemPrompt", today, 7, 1.0)
    client = login(account.name, "audrey", "auditor")
    response = client.get(reverse("admin:plugins_app_usagedaily_changelist"))
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == 3
    chart = response.context["chart"]
    assert [slug for slug, _ in chart["legend"]] == ["caveman", "card-mask"]
    runs_panel = chart["panels"][0]
    assert runs_panel["peak"] == "40"
    tallest = max(runs_panel["rects"], key=lambda r: r["h"])
    assert tallest["title"] == f"{today.isoformat()} caveman: 40" and tallest["h"] == 110
    page = response.content.decode()
    assert "<svg" in page and "globex-only" not in page and "999" not in page.split("<svg")[1].split("</svg>")[0]


def test_usage_chart_follows_the_filters_and_stacks_plugins(account):
    day = date(2026, 3, 31)
    usage(account, "a", "systemPrompt", day, 30, 300.0)
    usage(account, "b", "systemPrompt", day, 10, 100.0)
    usage(account, "b", "todoAdded", day, 20, 5000.0)
    chart = usage_chart(UsageDaily.objects.filter(hook="systemPrompt"), day)
    runs, time = chart["panels"]
    assert runs["peak"] == "40" and time["peak"] == "400 ms"
    heights = {r["title"]: r["h"] for r in runs["rects"]}
    assert heights == {"2026-03-31 a: 30": 82.5, "2026-03-31 b: 10": 27.5}
    full = usage_chart(UsageDaily.objects.all(), day)
    assert full["panels"][1]["peak"] == "5.4 s"
    assert usage_chart(UsageDaily.objects.none(), day)["empty"] is True


def _footer(response) -> str:
    return " ".join(response.content.decode().split('<p class="paginator">')[1].split("</p>")[0].split())


def test_list_footers_count_rows_in_words_a_person_would_use(login, account, log):
    # Issue 33: the footers said "3 cancel log" and "7 usage" (the models' plurals name the whole list).
    client = login(account.name, "audrey", "auditor")
    assert _footer(client.get(CANCELS)).startswith("3 cancel-log entries")
    assert _footer(client.get(CANCELS, {"hook": "sshCommandSending"})).startswith("1 cancel-log entry")
    for slug in ("a", "b"):
        UsageDaily.objects.create(account=account, plugin_slug=slug, hook="systemPrompt", day=date(2026, 1, 2),
                                  runs=1, total_ms=1.0)
    assert _footer(client.get(reverse("admin:plugins_app_usagedaily_changelist"))).startswith("2 usage rows")


def test_date_filters_offer_recent_ranges_and_a_format_not_a_sample_date(login, account, log):
    client = login(account.name, "audrey", "auditor")
    page = client.get(CANCELS).content.decode()
    presets = page.split('class="hub-filter-presets"')[1].split("</ul>")[0]
    today = timezone.localdate()
    week = f"created_at__since={(today - timedelta(days=6)).isoformat()}&amp;created_at__until={today.isoformat()}"
    assert "Past 7 days" in presets and week in presets and "Past 30 days" in presets and "Today" in presets
    assert 'placeholder="YYYY-MM-DD"' in page and 'placeholder="2026' not in page
    past_week = client.get(CANCELS, {"created_at__since": (today - timedelta(days=6)).isoformat(),
                                     "created_at__until": today.isoformat()})
    assert listed(past_week) == {log["ssh"].pk, log["prompt"].pk}   # not January's
    chosen = past_week.content.decode().split('class="hub-filter-presets"')[1].split("</ul>")[0]
    assert '<li class="selected"><a href="?created_at__since' in chosen

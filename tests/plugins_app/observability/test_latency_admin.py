"""The latency admin page and its report: ranges, worst plugins first, filters, scoping and auditors."""

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from plugins_app.models import LatencyHistogram
from plugins_app.services.observability.latency import LatencyRecorder, Window
from plugins_app.services.observability.latency_report import RANGES, report, slot_starts

pytestmark = pytest.mark.django_db
PAGE = reverse("admin:plugins_app_latencyhistogram_changelist")


def record(account, plugin, durations, status="ran", hook="systemPrompt", minute=None):
    recorder = LatencyRecorder()
    minute = int(time.time() // 60) if minute is None else minute
    window = recorder._pending.setdefault((account.pk, plugin, hook, minute), Window())
    for ms in durations:
        window.add(status, ms)
    recorder.flush()


@pytest.fixture
def histograms(account, other_account):
    """Records this minute and three minutes ago; returns a moment in this minute (one clock reading, so a
    minute turning during the test moves nothing)."""
    minute = int(time.time() // 60)
    record(account, "slow", [200.0] * 20, minute=minute)
    record(account, "quick", [1.0] * 30, minute=minute)
    record(account, "quick", [2.0] * 10, status="error", minute=minute)
    record(account, "quick", [1.5] * 5, minute=minute - 3)
    record(other_account, "other-tenants-plugin", [9000.0] * 5, minute=minute)
    return datetime.fromtimestamp(minute * 60 + 30, tz=UTC)


def test_the_report_ranks_the_slowest_and_most_failing_first(account, histograms):
    result = report(LatencyHistogram.objects.filter(account=account), "hour", now=histograms)
    assert [p["plugin"] for p in result["slowest"]] == ["slow", "quick"]
    assert result["slowest"][0]["p95Ms"] == 200.0
    assert [(p["plugin"], p["failures"]) for p in result["failing"]] == [("quick", 10)]
    assert result["failing"][0]["failureRate"] == round(100 * 10 / 45, 2)
    series = result["series"]
    assert len(series["labels"]) == 60 and series["calls"][-1] == 60 and series["calls"][-4] == 5
    assert series["p99"][-1] == 200.0 and series["p50"][-4] == 1.5 and series["p50"][0] is None


@pytest.mark.parametrize("key, count, step", [("hour", 60, timedelta(minutes=1)), ("day", 24, timedelta(hours=1)),
                                              ("30d", 30, timedelta(days=1))])
def test_each_range_has_its_windows_ending_now(key, count, step):
    now = timezone.now()
    starts = slot_starts(RANGES[key], now)
    assert len(starts) == count and starts[-1] <= now < starts[-1] + step
    assert all(b - a == step for a, b in zip(starts, starts[1:], strict=False))


def test_an_auditor_sees_charts_of_their_account_only(login, account, histograms):
    client = login("acme", "audrey", "auditor")
    response = client.get(PAGE, {"range": "day"})
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="latency-series"' in body and "vendor/chartjs/chart.umd.min.js" in body
    assert response.context["report"]["slowest"][0]["plugin"] == "slow"
    assert "other-tenants-plugin" not in body
    assert {row.plugin_slug for row in response.context["cl"].result_list} == {"slow", "quick"}
    assert {row.resolution for row in response.context["cl"].result_list} == {"hour"}
    assert client.get(reverse("admin:plugins_app_latencyhistogram_add")).status_code == 403


def test_the_charts_follow_the_filters(login, account, histograms):
    client = login("acme", "ada", "admin")
    response = client.get(PAGE, {"range": "hour", "plugin_slug": "quick"})
    result = response.context["report"]
    assert [p["plugin"] for p in result["slowest"]] == ["quick"]
    assert sorted(n for n in result["series"]["calls"] if n) == [5, 40]   # this minute's and three minutes ago


def test_an_empty_range_says_so(login, account):
    client = login("acme", "ada", "admin")
    response = client.get(PAGE, {"range": "30d"})
    assert response.context["report"]["empty"] and "No handler ran in this range." in response.content.decode()


def test_another_accounts_row_is_404(login, account, other_account, histograms):
    client = login("acme", "ada", "admin")
    foreign = LatencyHistogram.objects.filter(account=other_account).first()
    assert client.get(reverse("admin:plugins_app_latencyhistogram_change", args=[foreign.pk])).status_code == 404


def test_an_installation_page_links_to_its_own_latency(login, account, install, histograms):
    installation = install("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;", name="Slow")
    client = login("acme", "ada", "admin")
    page = client.get(reverse("admin:plugins_app_installation_change", args=[installation.pk])).content.decode()
    link = f"{PAGE}?account__id__exact={account.pk}&amp;plugin_slug={installation.plugin.slug}&amp;range=hour"
    assert link in page
    response = client.get(link.replace("&amp;", "&"))
    assert [p["plugin"] for p in response.context["report"]["slowest"]] == ["slow"]

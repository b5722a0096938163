"""Admin page details: the 403 page, people's titles and labels, ISO date filters."""

import pytest
from bs4 import BeautifulSoup
from django.urls import reverse

from plugins_app.models import HandlerWarning

pytestmark = pytest.mark.django_db


def test_a_refusal_is_a_page_with_a_way_back(login, account):
    client = login(account.name, "audrey", "auditor")
    response = client.get(reverse("admin:plugins_app_installation_add"), HTTP_REFERER="/admin/plugins_app/cancellog/")
    assert response.status_code == 403
    soup = BeautifulSoup(response.content, "html.parser")
    assert soup.title.get_text().startswith("You can't open this page")
    assert "You audit your accounts" in soup.get_text()
    links = {a.get_text(strip=True): a["href"] for a in soup.select(".hub-actions a")}
    assert links == {"Go back": "/admin/plugins_app/cancellog/", "Go to your home page": "/admin/"}


def test_list_titles_and_labels_read_as_a_person_would_say_them(login, account):
    HandlerWarning.objects.create(account=account, hook="systemPrompt", plugin_slug="slow-one", kind="timeout",
                                  message="ran past its budget")
    client = login(account.name, "audrey", "auditor")
    soup = BeautifulSoup(client.get(reverse("admin:plugins_app_handlerwarning_changelist")).content, "html.parser")
    assert soup.h1.get_text(strip=True) == "Handler warnings"
    assert "Select" not in soup.title.get_text()
    headers = [th.get_text(strip=True).lower() for th in soup.select("#result_list thead th")]
    assert "plugin" in headers and "plugin slug" not in headers
    soup = BeautifulSoup(client.get(reverse("admin:plugins_app_pluginlog_changelist")).content, "html.parser")
    assert soup.h1.get_text(strip=True) != "Select plugin log to view"


def test_date_filters_take_iso_days(login, account):
    client = login(account.name, "audrey", "auditor")
    soup = BeautifulSoup(client.get(reverse("admin:plugins_app_cancellog_changelist")).content, "html.parser")
    since = soup.select_one('input[name="created_at__since"]')
    # The format, not a sample date (issue 33: "2026-12-01" there read as a filter already set).
    assert since["type"] == "text" and since["placeholder"] == "YYYY-MM-DD" and not since.get("value")

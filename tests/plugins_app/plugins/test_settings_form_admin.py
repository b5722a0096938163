"""Settings forms built from an official plugin's schema: a field per setting with its type, choices,
default and required flag, errors next to the setting they name, and the JSON view kept."""

import pytest
from bs4 import BeautifulSoup
from django.urls import reverse

from plugins_app.models import Installation

pytestmark = pytest.mark.django_db

DETAIL = reverse("admin:plugins_app_installation_catalog_detail", args=["maintenance-window"])
WINDOW = {"setting_start": "22:00", "setting_end": "06:00", "setting_timeZone": "Europe/Berlin",
          "setting_days": ["mon", "fri"], "setting_kinds": ["cron_job"], "settings_mode": "form"}


@pytest.fixture
def admin_client(login, account, synced):
    return login(account.name, "alice", "admin")


def soup_of(response):
    return BeautifulSoup(response.content, "html.parser")


def test_the_form_follows_the_schema(admin_client):
    soup = soup_of(admin_client.get(DETAIL))
    start = soup.select_one('input[name="setting_start"]')
    assert start["type"] == "text" and start["placeholder"] == "e.g. 22:00" and start.has_attr("required")
    assert soup.select_one('label[for="id_setting_start"]').select_one(".hub-required")
    assert not soup.select_one('label[for="id_setting_timeZone"] .hub-required')
    assert soup.select_one('select[name="setting_timeZone"] option[selected]')["value"] == "UTC"
    assert "Europe/Berlin" in [o["value"] for o in soup.select('select[name="setting_timeZone"] option')]
    kinds = {i["value"]: i.has_attr("checked") for i in soup.select('input[name="setting_kinds"]')}
    assert kinds == {"cron_job": True, "heartbeat": True}   # the defaults, ticked
    assert len(soup.select('input[name="setting_days"]')) == 7
    assert "Local time the window opens" in soup.select_one(".field-setting_start .help").get_text()
    assert not soup.select('input[name="setting_utcOffsets"]')   # computed by the hub, never edited
    assert soup.select_one('textarea[name="settings_json"]')    # the JSON view for power users


def test_required_settings_left_empty_are_flagged_and_nothing_installs(admin_client, account):
    response = admin_client.post(DETAIL, {**WINDOW, "account": account.pk, "setting_start": "", "setting_end": ""})
    assert response.status_code == 200
    soup = soup_of(response)
    assert "Maintenance window was not installed" in soup.select_one(".errornote").get_text()
    assert "This field is required" in soup.select_one(".field-setting_start .errorlist").get_text()
    assert "This field is required" in soup.select_one(".field-setting_end .errorlist").get_text()
    assert not Installation.objects.exists()


def test_a_service_complaint_lands_on_its_setting(admin_client, account):
    response = admin_client.post(DETAIL, {**WINDOW, "account": account.pk, "setting_end": "24:30"})
    soup = soup_of(response)
    error = soup.select_one(".field-setting_end .errorlist").get_text()
    assert "expected a 24-hour time HH:MM" in error
    assert "settings.end" not in error and not error.startswith("end")   # the label beside it names the setting
    assert not soup.select_one(".field-setting_start .errorlist")
    assert not Installation.objects.exists()


def test_a_valid_form_installs_with_those_settings(admin_client, account):
    response = admin_client.post(DETAIL, {**WINDOW, "account": account.pk})
    assert response.status_code == 302
    installation = Installation.objects.get()
    settings = dict(installation.settings)
    assert settings.pop("utcOffsets")   # computed from the zone
    assert settings == {"start": "22:00", "end": "06:00", "timeZone": "Europe/Berlin", "days": ["mon", "fri"],
                        "kinds": ["cron_job"]}

    # The installation's page edits the same settings as a form.
    change = reverse("admin:plugins_app_installation_change", args=[installation.pk])
    soup = soup_of(admin_client.get(change))
    assert soup.select_one('input[name="setting_start"]')["value"] == "22:00"
    assert {i["value"] for i in soup.select('input[name="setting_days"][checked]')} == {"mon", "fri"}
    edited = admin_client.post(change, {"enabled": "on", **WINDOW, "setting_days": [], "setting_start": "23:15"})
    assert edited.status_code == 302
    installation.refresh_from_db()
    assert (installation.settings["start"], installation.settings["days"]) == ("23:15", [])
    bad = admin_client.post(change, {"enabled": "on", **WINDOW, "setting_timeZone": "Mars/Olympus"})
    assert bad.status_code == 200 and "Select a valid choice" in soup_of(bad).select_one(
        ".field-setting_timeZone .errorlist").get_text()


def test_the_json_view_still_installs(admin_client, account):
    response = admin_client.post(DETAIL, {"account": account.pk, "settings_mode": "json",
                                          "settings_json": '{"start": "01:00", "end": "02:00"}'})
    assert response.status_code == 302
    assert Installation.objects.get().settings["kinds"] == ["cron_job", "heartbeat"]


def test_the_json_view_names_the_setting_once(admin_client, account):
    response = admin_client.post(DETAIL, {"account": account.pk, "settings_mode": "json",
                                          "settings_json": '{"start": "01:00", "end": "24:30"}'})
    error = soup_of(response).select_one(".field-settings_json .errorlist").get_text()
    assert error.startswith("end: expected a 24-hour time") and "settings.end" not in error


def test_labels_and_chain_places_read_the_same_on_every_page(admin_client, account):
    # Issue 44 item 10: the catalog said "TimeZone", the installation page "timeZone:"; the installation
    # page counted chain places from 1 and its delete page from 0.
    catalog_label = soup_of(admin_client.get(DETAIL)).select_one('label[for="id_setting_timeZone"]').get_text()
    assert catalog_label.strip() == "timeZone"
    assert admin_client.post(DETAIL, {**WINDOW, "account": account.pk}).status_code == 302
    installation = Installation.objects.get()
    change = soup_of(admin_client.get(reverse("admin:plugins_app_installation_change", args=[installation.pk])))
    assert change.select_one('label[for="id_setting_timeZone"]').get_text().strip() == "timeZone"
    places = [a.get_text() for a in change.select(".field-chain_places a.hub-tag")]
    delete = admin_client.get(reverse("admin:plugins_app_installation_delete", args=[installation.pk]))
    assert places and all(f"{place}:" in delete.content.decode() for place in places)
    assert all(place.endswith("#1") for place in places)

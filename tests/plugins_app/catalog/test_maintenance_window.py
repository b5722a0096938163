"""maintenance-window through the real runtime, at the real current time: windows are chosen
relative to now (fixed-offset Etc/GMT zones put "now" at a chosen local hour)."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from plugins_app.models import CancelLog

from ..catalog_support import execute, install_official

pytestmark = pytest.mark.django_db

DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
FIRING = {"cronJobId": "7", "agentId": "2", "kind": "cron_job", "name": "nightly report", "prompt": "Write it."}


def zone_at_local_hour(hour: int) -> tuple[str, datetime]:
    """An Etc/GMT zone whose local time is now `hour`:xx, and that local time."""
    now = datetime.now(UTC)
    offset = (hour - now.hour) % 24
    offset = offset - 24 if offset > 11 else offset
    name = "Etc/UTC" if offset == 0 else f"Etc/GMT{'-' if offset > 0 else '+'}{abs(offset)}"   # POSIX signs
    return name, now.astimezone(ZoneInfo(name))


def hhmm(minute_of_day: int) -> str:
    minute_of_day %= 24 * 60
    return f"{minute_of_day // 60:02d}:{minute_of_day % 60:02d}"


def fire(api_client, settings, **context):
    install_official(api_client, "maintenance-window", settings)
    return execute(api_client, "cronJobFiring", dict(FIRING, **context))


def test_holds_a_mission_inside_a_window_past_midnight_evening_part(api_client, synced, account):
    zone, local = zone_at_local_hour(22)
    result = fire(api_client, {"start": "21:00", "end": "03:00", "timeZone": zone})
    assert result["outcome"] == "cancelled"
    assert result["cancellation"]["reason"] == f"held: maintenance window 21:00\u201303:00 {zone}"
    assert CancelLog.objects.get(account=account).reason == result["cancellation"]["reason"]


def test_holds_a_mission_inside_a_window_past_midnight_morning_part(api_client, synced):
    zone, _ = zone_at_local_hour(1)
    assert fire(api_client, {"start": "22:00", "end": "04:00", "timeZone": zone})["outcome"] == "cancelled"


def test_lets_a_mission_run_outside_the_window(api_client, synced):
    zone, _ = zone_at_local_hour(12)
    result = fire(api_client, {"start": "22:00", "end": "06:00", "timeZone": zone})
    assert (result["outcome"], result["value"]) == ("unchanged", "Write it.")


def test_a_daytime_window(api_client, synced):
    zone, _ = zone_at_local_hour(10)
    assert fire(api_client, {"start": "09:00", "end": "12:00", "timeZone": zone})["outcome"] == "cancelled"


def test_start_equal_to_end_is_the_whole_day(api_client, synced):
    zone, _ = zone_at_local_hour(15)
    assert fire(api_client, {"start": "00:00", "end": "00:00", "timeZone": zone})["outcome"] == "cancelled"


def test_days_select_the_day_the_window_opens(api_client, synced):
    zone, local = zone_at_local_hour(10)
    today = DAYS[local.weekday()]
    others = [d for d in DAYS if d != today]
    held = fire(api_client, {"start": "09:00", "end": "12:00", "timeZone": zone, "days": [today]})
    assert held["cancellation"]["reason"] == f"held: maintenance window 09:00\u201312:00 {zone} on {today}"
    api_client.delete(f"/api/v1/plugins/{held['cancellation']['installationId']}")
    assert fire(api_client, {"start": "09:00", "end": "12:00", "timeZone": zone, "days": others})["outcome"] == "unchanged"


def test_after_midnight_the_window_belongs_to_the_day_before(api_client, synced):
    zone, local = zone_at_local_hour(1)
    today, yesterday = DAYS[local.weekday()], DAYS[(local.weekday() - 1) % 7]
    opened_yesterday = fire(api_client, {"start": "22:00", "end": "04:00", "timeZone": zone, "days": [yesterday]})
    assert opened_yesterday["outcome"] == "cancelled"
    api_client.delete(f"/api/v1/plugins/{opened_yesterday['cancellation']['installationId']}")
    assert fire(api_client, {"start": "22:00", "end": "04:00", "timeZone": zone, "days": [today]})["outcome"] == "unchanged"


@pytest.mark.parametrize("zone", ["Europe/Berlin", "Asia/Kathmandu", "America/St_Johns", "Australia/Lord_Howe"])
def test_real_zones_with_daylight_saving_and_odd_offsets(api_client, synced, zone):
    local = datetime.now(UTC).astimezone(ZoneInfo(zone))
    minute = local.hour * 60 + local.minute
    # +-10 minutes: an offset wrong by a quarter of an hour (or by DST) would miss it.
    inside = {"start": hhmm(minute - 10), "end": hhmm(minute + 10), "timeZone": zone}
    held = fire(api_client, inside)
    assert held["outcome"] == "cancelled", (local, inside)
    api_client.delete(f"/api/v1/plugins/{held['cancellation']['installationId']}")
    after = {"start": hhmm(minute + 20), "end": hhmm(minute + 40), "timeZone": zone}
    assert fire(api_client, after)["outcome"] == "unchanged", (local, after)


def test_kinds_limit_what_is_held(api_client, synced):
    zone, _ = zone_at_local_hour(3)
    settings = {"start": "00:00", "end": "06:00", "timeZone": zone, "kinds": ["cron_job"]}
    assert fire(api_client, settings, kind="heartbeat")["outcome"] == "unchanged"
    assert execute(api_client, "cronJobFiring", FIRING)["outcome"] == "cancelled"


def test_settings_get_the_zone_offsets_and_defaults(api_client, synced):
    installed = install_official(api_client, "maintenance-window", {"start": "22:00", "end": "06:00",
                                                                     "timeZone": "Europe/Berlin"})
    settings = installed["settings"]
    assert {k: settings[k] for k in ("start", "end", "timeZone", "days", "kinds")} == {
        "start": "22:00", "end": "06:00", "timeZone": "Europe/Berlin", "days": [],
        "kinds": ["cron_job", "heartbeat"]}
    offsets = dict(settings["utcOffsets"])
    assert set(offsets.values()) == {3600, 7200}                 # CET and CEST
    summer = datetime(datetime.now().year + 1, 7, 1, tzinfo=UTC).timestamp()
    assert [o for t, o in settings["utcOffsets"] if t <= summer][-1] == 7200


@pytest.mark.parametrize("values, field, message", [
    ({"end": "06:00"}, "settings.start", "needs this setting"),
    ({"start": "25:00", "end": "06:00"}, "settings.start", "HH:MM"),
    ({"start": "7:00", "end": "06:00"}, "settings.start", "HH:MM"),
    ({"start": "22:00", "end": "06:00", "timeZone": "Mars/Olympus"}, "settings.timeZone", "IANA time zone"),
    ({"start": "22:00", "end": "06:00", "timeZone": "Europe"}, "settings.timeZone", "IANA time zone"),
    ({"start": "22:00", "end": "06:00", "timeZone": "../../etc/passwd"}, "settings.timeZone", "IANA time zone"),
    ({"start": "22:00", "end": "06:00", "days": ["funday"]}, "settings.days", "'funday' is not one of"),
    ({"start": "22:00", "end": "06:00", "kinds": "cron_job"}, "settings.kinds", "array of strings"),
    ({"start": "22:00", "end": "06:00", "window": "x"}, "settings.window", "has no such setting"),
])
def test_bad_settings_are_refused_naming_the_setting(api_client, synced, values, field, message):
    response = api_client.post("/api/v1/plugins", {"catalog": "maintenance-window", "settings": values},
                               format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid", field)
    assert message in error["message"]
    assert api_client.get("/api/v1/plugins").json()["plugins"] == []


def test_offsets_match_zoneinfo_across_transitions():
    from plugins_app.services.plugins.settings import utc_offsets

    year = datetime.now(UTC).year
    for zone in ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "UTC"):
        table = utc_offsets(zone, year)
        assert table == sorted(table) and table[0][0] == datetime(year, 1, 1, tzinfo=UTC).timestamp()
        at = datetime(year, 1, 1, tzinfo=UTC)
        while at.year < year + 11:
            expected = int(at.astimezone(ZoneInfo(zone)).utcoffset().total_seconds())
            assert [o for t, o in table if t <= at.timestamp()][-1] == expected, (zone, at)
            at += timedelta(hours=7, minutes=13)
        for t, _ in table[1:]:   # each transition is exact to the second
            before = datetime.fromtimestamp(t - 1, UTC).astimezone(ZoneInfo(zone)).utcoffset()
            after = datetime.fromtimestamp(t, UTC).astimezone(ZoneInfo(zone)).utcoffset()
            assert before != after, (zone, t)

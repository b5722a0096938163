"""Quarantine and slow-lane state: strikes in a window, expiry by time, one warning per cool-down,
release through the API."""

from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import Account
from plugins_app.models import HandlerWarning, Installation, Plugin
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import ChainResult, HandlerTrace
from plugins_app.services.execution import quarantine
from plugins_app.services.execution.observers import ChainRun

pytestmark = pytest.mark.django_db


def make_installation(account, name="Slowpoke"):
    """An installation stored directly: these tests need its row, not the engine."""
    plugin = Plugin.objects.create(account=account, name=name, slug=name.lower(), source="// stored",
                                   compiled_js="// stored", code_hash="0" * 64, hooks=["systemPrompt"])
    return Installation.objects.create(account=account, plugin=plugin)


def version(account) -> int:
    return Account.objects.values_list("hooks_version", flat=True).get(pk=account.pk)


def strike(installation, times=1, kind="timeout", now=None):
    return [quarantine.record_misbehaviour(installation.account_id, installation.pk, kind, "ran past 5 s", now=now)
            for _ in range(times)]


def reload(installation):
    installation.refresh_from_db()
    return installation


@pytest.fixture
def slowpoke(account):
    return make_installation(account)


def test_the_third_strike_within_the_window_quarantines_and_bumps_the_marker(account, slowpoke):
    assert strike(slowpoke, 2) == [False, False]
    assert not quarantine.is_quarantined(reload(slowpoke))
    assert len(slowpoke.strikes) == 2
    before = version(account)

    assert strike(slowpoke, kind="wedged") == [True]

    slowpoke = reload(slowpoke)
    assert version(account) == before + 1
    assert quarantine.is_quarantined(slowpoke)
    assert slowpoke.quarantined_until - timezone.now() > timedelta(seconds=590)
    assert slowpoke.quarantine_reason.startswith("3 timeouts/wedges/memory overruns within 10 minutes")
    assert "wedged its engine" in slowpoke.quarantine_reason
    assert slowpoke.strikes == [] and slowpoke.quarantine_warned is False


def test_strikes_older_than_the_window_are_dropped(slowpoke):
    old = (timezone.now() - timedelta(minutes=11)).isoformat()
    Installation.objects.filter(pk=slowpoke.pk).update(strikes=[old, old])

    assert strike(slowpoke) == [False]
    assert reload(slowpoke).strikes != [old, old] and len(slowpoke.strikes) == 1
    assert not quarantine.is_quarantined(slowpoke)


def test_strikes_spread_over_more_than_the_window_never_quarantine(slowpoke):
    start = timezone.now()
    results = [strike(slowpoke, now=start + timedelta(minutes=6 * i))[0] for i in range(4)]
    assert results == [False, False, False, False]
    assert quarantine.status(reload(slowpoke), now=start + timedelta(minutes=18))["strikes"] == 2


def test_the_strike_list_stays_bounded(settings, slowpoke):
    settings.HUB_QUARANTINE = replace(settings.HUB_QUARANTINE, strikes=100)
    strike(slowpoke, 12)
    assert len(reload(slowpoke).strikes) == quarantine.MAX_STRIKES_KEPT


def test_settings_choose_strikes_and_cool_down(settings, slowpoke):
    settings.HUB_QUARANTINE = replace(settings.HUB_QUARANTINE, strikes=1)
    settings.HUB_QUARANTINE = replace(settings.HUB_QUARANTINE, seconds=30)
    assert strike(slowpoke, kind="memory") == [True]
    slowpoke = reload(slowpoke)
    assert timedelta(seconds=25) < slowpoke.quarantined_until - timezone.now() <= timedelta(seconds=30)
    assert "ran out of memory" in slowpoke.quarantine_reason


def test_quarantine_ends_by_itself_and_comes_back_if_it_still_misbehaves(account, slowpoke):
    strike(slowpoke, 3)
    until = reload(slowpoke).quarantined_until
    assert quarantine.status(slowpoke, now=until - timedelta(seconds=1))["quarantined"] is True
    after = until + timedelta(seconds=1)
    assert quarantine.status(slowpoke, now=after) == {
        "quarantined": False, "until": None, "reason": "", "strikes": 0, "slowLane": False, "slowLaneUntil": None}

    assert strike(slowpoke, 3, now=after) == [False, False, True]
    assert reload(slowpoke).quarantined_until > until


def test_a_deleted_or_foreign_installation_is_a_no_op(account, other_account, slowpoke):
    before = version(account)
    assert quarantine.record_misbehaviour(account.pk, 999_999, "timeout", "gone") is False
    assert quarantine.record_misbehaviour(other_account.pk, slowpoke.pk, "timeout", "not theirs") is False
    quarantine.mark_slow_lane(other_account.pk, slowpoke.pk, "not theirs")
    assert reload(slowpoke).strikes == [] and slowpoke.slow_lane_until is None
    assert version(account) == before


def test_ids_may_arrive_as_strings(slowpoke):
    assert quarantine.record_misbehaviour(str(slowpoke.account_id), str(slowpoke.pk), "timeout", "x") is False
    assert len(reload(slowpoke).strikes) == 1


def test_an_unknown_kind_is_a_programming_error(slowpoke):
    with pytest.raises(ValueError, match="unknown misbehaviour"):
        quarantine.record_misbehaviour(slowpoke.account_id, slowpoke.pk, "slow", "x")


def test_the_slow_lane_bumps_the_marker_only_when_entered(account, slowpoke):
    before = version(account)
    quarantine.mark_slow_lane(account.pk, slowpoke.pk, "1 s of CPU per call")
    first_until = reload(slowpoke).slow_lane_until
    quarantine.mark_slow_lane(account.pk, slowpoke.pk, "1 s of CPU per call")

    assert version(account) == before + 1
    assert reload(slowpoke).slow_lane_until > first_until
    assert slowpoke.slow_lane_reason == "1 s of CPU per call"
    status = quarantine.status(slowpoke)
    assert status["slowLane"] is True and status["quarantined"] is False


def test_any_misbehaviour_moves_the_installation_to_the_slow_lane(account, slowpoke):
    before = version(account)
    strike(slowpoke, 2)
    slowpoke = reload(slowpoke)
    assert quarantine.in_slow_lane(slowpoke)
    assert "timed out" in slowpoke.slow_lane_reason
    assert version(account) == before + 1   # entering the lane, not the second strike


def test_the_slow_lane_ends_by_itself(settings, account, slowpoke):
    quarantine.mark_slow_lane(account.pk, slowpoke.pk, "hog")
    later = reload(slowpoke).slow_lane_until + timedelta(seconds=1)
    assert quarantine.status(slowpoke, now=later)["slowLane"] is False
    before = version(account)
    quarantine.mark_slow_lane(account.pk, slowpoke.pk, "hog again", now=later)
    assert version(account) == before + 1


def test_a_skip_warning_is_written_once_per_cool_down(account, slowpoke):
    strike(slowpoke, 3)
    quarantine.note_quarantine_skip(account, slowpoke.pk, "systemPrompt", "slowpoke")
    quarantine.note_quarantine_skip(account, str(slowpoke.pk), "systemPrompt", "slowpoke")

    warning = HandlerWarning.objects.get()
    assert warning.kind == HandlerWarning.Kind.QUARANTINED
    assert warning.installation_id == slowpoke.pk and warning.hook == "systemPrompt"
    assert "quarantined until" in warning.message and "3 timeouts/wedges" in warning.message

    # The next cool-down warns again.
    until = reload(slowpoke).quarantined_until
    strike(slowpoke, 3, now=until + timedelta(seconds=1))
    quarantine.note_quarantine_skip(account, slowpoke.pk, "systemPrompt", "slowpoke",
                                    now=until + timedelta(seconds=2))
    assert HandlerWarning.objects.count() == 2


def test_no_skip_warning_without_an_active_quarantine(account, other_account, slowpoke):
    quarantine.note_quarantine_skip(account, slowpoke.pk, "systemPrompt", "slowpoke")
    strike(slowpoke, 3)
    quarantine.note_quarantine_skip(other_account, slowpoke.pk, "systemPrompt", "slowpoke")
    until = reload(slowpoke).quarantined_until
    quarantine.note_quarantine_skip(account, slowpoke.pk, "systemPrompt", "slowpoke",
                                    now=until + timedelta(seconds=1))
    assert not HandlerWarning.objects.exists()
    assert reload(slowpoke).quarantine_warned is False


def test_release_clears_everything_and_bumps_the_marker(account, slowpoke):
    strike(slowpoke, 3)
    strike(slowpoke)   # an in-flight call that timed out after the quarantine began
    before = version(account)

    released = quarantine.release(account, str(slowpoke.pk))

    assert released.pk == slowpoke.pk and released.quarantined_until is None
    stored = reload(slowpoke)
    assert (stored.quarantined_until, stored.quarantine_reason, stored.strikes, stored.slow_lane_until) == \
        (None, "", [], None)
    assert version(account) == before + 1


def test_get_shows_the_quarantine_status(api_client, account, slowpoke):
    strike(slowpoke, 3)
    body = api_client.get(f"/api/v1/plugins/{slowpoke.pk}").json()
    status = body["quarantine"]
    assert status["quarantined"] is True and status["slowLane"] is True
    assert status["until"] == reload(slowpoke).quarantined_until.isoformat()
    assert status["reason"].startswith("3 timeouts/wedges") and status["strikes"] == 0

    listed = api_client.get("/api/v1/plugins").json()["plugins"]
    assert [(p["installationId"], p["quarantine"]["quarantined"]) for p in listed] == [(str(slowpoke.pk), True)]


def test_release_through_the_api(api_client, account, slowpoke):
    strike(slowpoke, 3)
    before = version(account)

    response = api_client.post(f"/api/v1/plugins/{slowpoke.pk}/release")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["installationId"] == str(slowpoke.pk)
    assert body["quarantine"] == {"quarantined": False, "until": None, "reason": "", "strikes": 0,
                                  "slowLane": False, "slowLaneUntil": None}
    assert reload(slowpoke).quarantined_until is None and slowpoke.slow_lane_until is None
    assert version(account) == before + 1


def test_another_accounts_installation_cannot_be_released(other_api_client, account, slowpoke):
    strike(slowpoke, 3)
    before = version(account)

    response = other_api_client.post(f"/api/v1/plugins/{slowpoke.pk}/release")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert quarantine.is_quarantined(reload(slowpoke))
    assert version(account) == before


def test_later_skips_in_one_cool_down_ask_the_database_nothing(account, slowpoke, django_assert_num_queries):
    strike(slowpoke, 3)
    until = reload(slowpoke).quarantined_until.timestamp()
    quarantine.note_quarantine_skip(account, slowpoke.pk, "systemPrompt", "slowpoke", until=until)
    assert HandlerWarning.objects.filter(kind=HandlerWarning.Kind.QUARANTINED).count() == 1
    with django_assert_num_queries(0):
        quarantine.note_quarantine_skip(account, slowpoke.pk, "systemPrompt", "slowpoke", until=until)


def _run_with(account, entry):
    result = ChainResult("systemPrompt", "unchanged", {}, "", None, [entry])
    return ChainRun(account, HOOKS["systemPrompt"], {}, result, hop=0, turn_id="t")


def test_a_timeout_the_hub_made_by_keeping_host_calls_strikes_nobody(account, slowpoke):
    held = HandlerTrace(str(slowpoke.pk), "slowpoke", "timeout", False, 5000.0, "no result", hub_held_ms=3100.0)
    own = replace(held, hub_held_ms=0.0)
    quarantine.observe_chain(_run_with(account, held))
    assert reload(slowpoke).strikes == []
    quarantine.observe_chain(_run_with(account, own))
    assert len(reload(slowpoke).strikes) == 1

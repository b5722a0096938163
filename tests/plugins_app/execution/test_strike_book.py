"""Strikes follow the plugin's code and its account across reinstalls (issue 39, item 2): uninstalling
and installing the same code again keeps its strikes and quarantine, and an account whose plugins keep
costing engines has every installation moved to the lane."""

import pytest
from django.utils import timezone

from plugins_app.models import Installation, Plugin, StrikeBook
from plugins_app.services.execution import quarantine
from plugins_app.services.plugins import installations

pytestmark = pytest.mark.django_db


def stored_plugin(account, name, code_hash):
    """A plugin stored directly (these tests need its rows, not the engine)."""
    return Plugin.objects.create(account=account, name=name, slug=name.lower(), source="// stored",
                                 compiled_js="// stored", code_hash=code_hash, hooks=["systemPrompt"])


def install(account, name="Bomb", code_hash="b" * 64) -> Installation:
    plugin = Plugin.objects.filter(account=account, slug=name.lower()).first() or stored_plugin(account, name, code_hash)
    return installations.install_existing(account, plugin)


def reinstall(installation: Installation) -> Installation:
    """Uninstall (the row and its plugin go) and install the same code again under the same name."""
    account, plugin = installation.account, installation.plugin
    name, code_hash = plugin.name, plugin.code_hash
    installation.delete()
    plugin.delete()
    return install(account, name, code_hash)


def strike(installation, kind="memory"):
    return quarantine.record_misbehaviour(installation.account_id, installation.pk, kind, "kept too much")


def test_strikes_follow_the_code_across_reinstalls(account):
    first = install(account)
    assert strike(first) is False
    second = reinstall(first)
    assert len(second.strikes) == 1               # the strike came back with the code
    assert quarantine.in_slow_lane(second)        # ...and so did the lane
    assert strike(second) is False
    third = reinstall(second)
    assert strike(third) is True                  # the third strike across three installations quarantines
    third.refresh_from_db()
    assert quarantine.is_quarantined(third)


def test_a_quarantined_code_installed_again_is_quarantined_at_once(account):
    bomb = install(account)
    assert [strike(bomb, "timeout") for _ in range(3)] == [False, False, True]
    again = reinstall(bomb)
    assert quarantine.run_state(again) == "quarantined"
    assert "timeouts/wedges/memory overruns" in again.quarantine_reason


def test_other_code_and_other_accounts_start_clean(account, other_account):
    bomb = install(account)
    strike(bomb)
    strike(bomb)
    other_code = install(account, "Other", "c" * 64)
    same_code_elsewhere = install(other_account, "Bomb", "b" * 64)
    assert other_code.strikes == [] and not quarantine.is_quarantined(other_code)
    assert same_code_elsewhere.strikes == [] and not quarantine.in_slow_lane(same_code_elsewhere)


def test_an_account_that_keeps_costing_engines_is_laned_whole(account, other_account):
    quiet = install(account, "Quiet", "d" * 64)
    bystander = install(other_account, "Quiet", "d" * 64)
    bombs = [install(account, f"Bomb{n}", f"{n}" * 64) for n in range(3)]
    # Each plugin alone is far from its own quarantine; the account has cost three engines.
    for bomb in bombs:
        assert strike(bomb, "wedged") is False
    quiet.refresh_from_db()
    bystander.refresh_from_db()
    assert quarantine.in_slow_lane(quiet) and "cost an engine 3 times" in quiet.slow_lane_reason
    assert not quarantine.in_slow_lane(bystander)
    # A new installation of the account starts in the lane too.
    newcomer = install(account, "Newcomer", "e" * 64)
    assert quarantine.in_slow_lane(newcomer) and "keep costing engines" in newcomer.slow_lane_reason


def test_timeouts_are_the_handlers_own_and_never_lane_the_account(account):
    quiet = install(account, "Quiet", "d" * 64)
    for n in range(3):
        strike(install(account, f"Slow{n}", f"{n}" * 64), "timeout")
    quiet.refresh_from_db()
    assert not quarantine.in_slow_lane(quiet)


def test_release_forgives_the_code(account):
    bomb = install(account)
    strike(bomb)
    strike(bomb)
    quarantine.release(account, bomb.pk)
    assert not StrikeBook.objects.filter(account=account, code_hash="b" * 64).exists()
    again = reinstall(Installation.objects.get(pk=bomb.pk))
    assert again.strikes == [] and not quarantine.in_slow_lane(again, timezone.now())

"""Shadow at the live version's place (issue 43): a shadowed draft is given the input its live version saw,
not the live chain's output, and each call is compared with what the live version made of it."""

import pytest

from plugins_app.models import CancelLog, HandlerWarning, UsageDaily
from plugins_app.services.versions import releases as versions

from ..conftest import PROMPT, appender
from .test_shadow_api import execute, report, set_mode

pytestmark = pytest.mark.django_db

SIGNATURE = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' -- sent by Acme bot';"
# The same behaviour, rewritten: a draft that should compare `same` on every call.
SIGNATURE_V2 = ("const SIGN = ' -- sent by Acme bot';\n"
                "globalThis.middleware.systemPrompt = async (c) => `${c.systemPrompt}${SIGN}`;")


def test_a_signature_appending_draft_sees_the_same_input_and_signs_once(api_client, install, account, eager):
    install(appender("-a"), name="before")
    signer = install(SIGNATURE, name="signer")
    install(appender("-b"), name="after")
    versions.create_draft(account, signer.pk, source=SIGNATURE_V2, language="javascript")
    assert set_mode(api_client, signer, shadowVersion=2).status_code == 200
    body = execute(api_client, PROMPT, "systemPrompt")
    assert body["value"] == "base-a -- sent by Acme bot-b"   # the live chain is untouched
    shadow = report(api_client, signer)
    assert shadow["counts"]["calls"] == 1 and shadow["counts"]["same"] == 1 and shadow["counts"]["different"] == 0
    [example] = shadow["examples"]["same"]
    assert example["input"] == "base-a"   # what the live version was given, not the chain's output
    assert example["live"]["value"] == "base-a -- sent by Acme bot"
    assert example["candidate"]["value"] == "base-a -- sent by Acme bot"   # one signature, not two
    assert example["version"] == 2 and example["hook"] == "systemPrompt"


GUARD = ("globalThis.middleware.userMessageInbound = async (c, t) => "
         "c.text.startsWith('rm') ? t.cancel('no rm') : c.text;")
GUARD_V2 = """globalThis.middleware.userMessageInbound = async (c, t) => {
  if (c.text === 'boom') throw new Error('kaboom');
  if (c.text.includes('secret')) return t.cancel('no secrets');
  if (c.text.startsWith('x')) return c.text.toUpperCase();
  return c.text;
};"""
TRIM = "globalThis.middleware.userMessageInbound = async (c) => c.text.trim();"


def test_each_kind_is_counted_with_its_latest_examples_side_by_side(api_client, install, account, eager):
    install(TRIM, name="trim")   # ahead of the guard: the draft is given the trimmed text
    guard = install(GUARD, name="guard")
    versions.create_draft(account, guard.pk, source=GUARD_V2, language="javascript")
    set_mode(api_client, guard, shadowVersion=2)
    inbound = {"sessionId": "10", "channelId": None, "mediaIds": []}
    for text in ["  hello ", "xyz", "my secret", "rm -rf /", "boom", "hi"]:
        execute(api_client, dict(inbound, text=text))
    shadow = report(api_client, guard)
    assert shadow["counts"] == {"calls": 6, "same": 2, "different": 1, "wouldCancel": 1, "wouldNoLongerCancel": 1,
                                "failed": 1, "wouldChange": 1}
    examples = shadow["examples"]
    assert [e["input"] for e in examples["same"]] == ["hi", "hello"]   # newest first, trimmed by the live 'trim'
    assert (examples["different"][0]["live"]["value"], examples["different"][0]["candidate"]["value"]) == ("xyz", "XYZ")
    assert examples["wouldCancel"][0]["candidate"] == {"status": "cancelled", "value": "my secret",
                                                       "reason": "no secrets"}
    assert examples["wouldNoLongerCancel"][0]["live"]["reason"] == "no rm"
    assert examples["wouldNoLongerCancel"][0]["candidate"]["status"] == "unchanged"
    assert "kaboom" in examples["failed"][0]["candidate"]["reason"]
    # The live guard's cancel was recorded once (by the live run); the shadow wrote no cancel or warning.
    assert CancelLog.objects.count() == 1 and HandlerWarning.objects.count() == 0
    assert UsageDaily.objects.get(plugin_slug="guard:shadow").runs == 6


def test_the_examples_keep_the_twenty_latest_of_a_kind(api_client, install, account, eager):
    guard = install(GUARD, name="guard")
    versions.create_draft(account, guard.pk, source=GUARD_V2, language="javascript")
    set_mode(api_client, guard, shadowVersion=2)
    for n in range(23):
        execute(api_client, {"sessionId": "10", "channelId": None, "mediaIds": [], "text": f"x{n}"})
    shadow = report(api_client, guard)
    assert shadow["counts"]["different"] == 23
    assert [e["input"] for e in shadow["examples"]["different"]] == [f"x{n}" for n in range(22, 2, -1)]


def test_an_installation_in_shadow_mode_runs_at_the_place_it_kept(api_client, install, eager):
    first, _second = install(appender("-a"), name="first"), install(appender("-b"), name="second")
    set_mode(api_client, first, mode="shadow")
    assert execute(api_client, PROMPT, "systemPrompt")["value"] == "base-b"
    shadow = report(api_client, first)
    [example] = shadow["examples"]["different"]
    # Its place is ahead of 'second': it is given the context's own value, which the live chain passes
    # on unchanged there (not 'base-b', the live chain's output).
    assert example["input"] == "base" and example["live"]["value"] == "base"
    assert example["candidate"]["value"] == "base-a"


def test_a_draft_is_not_run_where_the_live_chain_cancelled_before_its_place(api_client, install, account, eager):
    install(GUARD, name="guard")
    tail = install("globalThis.middleware.userMessageInbound = async (c) => c.text + '!';", name="tail")
    versions.create_draft(account, tail.pk, source=TRIM, language="javascript")
    set_mode(api_client, tail, shadowVersion=2)
    execute(api_client, {"sessionId": "10", "channelId": None, "mediaIds": [], "text": "rm x"})
    assert report(api_client, tail)["counts"]["calls"] == 0   # the live version never saw this call

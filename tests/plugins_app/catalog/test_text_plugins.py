"""caveman, card-mask and agent-audit through the real runtime: what each changes, what each
leaves alone, and their settings."""

import pytest

from ..catalog_support import execute, install_official, logs, patch_settings

pytestmark = pytest.mark.django_db

PROMPT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "You are a helpful agent."}


def luhn_complete(prefix: str, length: int) -> str:
    """`prefix` padded with zeros to length - 1, plus the Luhn check digit."""
    body = prefix.ljust(length - 1, "0")
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return body + str((10 - total % 10) % 10)


# -- caveman ---------------------------------------------------------------------------------

def test_caveman_appends_the_doctrine_and_keeps_the_prompt(api_client, synced):
    install_official(api_client, "caveman")
    value = execute(api_client, "systemPrompt", PROMPT)["value"]
    assert value.startswith(PROMPT["systemPrompt"] + "\n\n[caveman] Answer tersely. Few words.")
    assert "error messages stay exact" in value


def test_caveman_does_not_append_twice(api_client, synced):
    install_official(api_client, "caveman")
    once = execute(api_client, "systemPrompt", PROMPT)["value"]
    again = execute(api_client, "systemPrompt", dict(PROMPT, systemPrompt=once))
    assert (again["outcome"], again["value"]) == ("unchanged", once)


def test_caveman_intensity_setting_and_a_change_reaches_the_next_call(api_client, synced):
    installed = install_official(api_client, "caveman", {"intensity": "lite"})
    assert installed["settings"] == {"intensity": "lite"}
    assert "[caveman] Keep answers short." in execute(api_client, "systemPrompt", PROMPT)["value"]
    # The chain cache hashes settings into the handler's identity: the engine reloads the
    # compartment with the new host.config on the very next call.
    assert patch_settings(api_client, installed["id"], {"intensity": "ultra"}).status_code == 200
    assert "[caveman] Caveman mode." in execute(api_client, "systemPrompt", PROMPT)["value"]
    assert patch_settings(api_client, installed["id"], {"intensity": None}).json()["settings"] == {"intensity": "full"}
    assert "[caveman] Answer tersely." in execute(api_client, "systemPrompt", PROMPT)["value"]


def test_caveman_rejects_an_unknown_intensity(api_client, synced):
    response = api_client.post("/api/v1/plugins", {"catalog": "caveman", "settings": {"intensity": "max"}},
                               format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "settings.intensity"
    assert "lite, full, ultra" in response.json()["error"]["message"]


# -- card-mask -------------------------------------------------------------------------------

CARDS = [
    ("4111111111111111", "1111"), ("4111 1111 1111 1111", "1111"), ("4111-1111-1111-1111", "1111"),
    ("3782 822463 10005", "0005"), ("378282246310005", "0005"), ("3056 930902 5904", "5904"),
    ("5555555555554444", "4444"), ("2221 0000 0000 0009", "0009"), ("6011111111111117", "1117"),
    (luhn_complete("6", 19), luhn_complete("6", 19)[-4:]), (luhn_complete("4", 13), luhn_complete("4", 13)[-4:]),
]

NOT_CARDS = [
    "call me at +1 415 555 2671 or +49 30 12345678",
    "order #100234567, invoice 2024-000123",
    "timestamp 1718031234567 and " + luhn_complete("1", 16),   # Luhn-valid, but no issuer starts with 1
    "4111 1111 1111 1112",                                      # fails the Luhn check
    "IBAN DE89370400440532013000",
    "ISBN 978-3-16-148410-0, version 2.14.1",
    "tracking 1Z999AA10123456784",
    "41111111111111111111 is twenty digits",
    "4111 1111 1111 1111 1111 1111 is too long to be one card",
    "total: 4,111.11 EUR",
]


def inbound(text):
    return {"sessionId": "1", "channelId": None, "mediaIds": [], "text": text}


def test_card_mask_masks_card_numbers_keeping_the_last_four(api_client, synced):
    install_official(api_client, "card-mask")
    wrong = {}
    for card, last4 in CARDS:
        value = execute(api_client, "userMessageInbound", inbound(f"pay with {card}, thanks"))["value"]
        if value != f"pay with [card ending {last4}], thanks":
            wrong[card] = value
    assert wrong == {}
    two = execute(api_client, "userMessageInbound", inbound("4111111111111111 and 5555-5555-5555-4444"))
    assert two["value"] == "[card ending 1111] and [card ending 4444]"


def test_card_mask_leaves_other_numbers_alone(api_client, synced):
    install_official(api_client, "card-mask")
    changed = {t: r["value"] for t in NOT_CARDS
               if (r := execute(api_client, "userMessageInbound", inbound(t)))["outcome"] != "unchanged"}
    assert changed == {}


def test_card_mask_handles_long_messages_in_time(api_client, synced):
    install_official(api_client, "card-mask")
    for filler in ("1 " * 150_000, "9" * 300_000, "12-" * 100_000):
        result = execute(api_client, "userMessageInbound", inbound(f"{filler} x 4111 1111 1111 1111"))
        assert result["value"].endswith(" x [card ending 1111]"), result["trace"]


def test_card_mask_can_drop_the_last_four(api_client, synced):
    install_official(api_client, "card-mask", {"keepLast4": False})
    value = execute(api_client, "userMessageInbound", inbound("card 4111 1111 1111 1111"))["value"]
    assert value == "card [card number removed]"


def test_card_mask_keep_last4_must_be_a_boolean(api_client, synced):
    response = api_client.post("/api/v1/plugins", {"catalog": "card-mask", "settings": {"keepLast4": "yes"}},
                               format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "settings.keepLast4"


# -- agent-audit -----------------------------------------------------------------------------

def message(text, report=False):
    return {"senderSessionId": "11", "senderAgentId": "22", "targetSessionId": "33",
            "isSubagentReport": report, "text": text}


def test_agent_audit_logs_every_message_and_passes_it_unchanged(api_client, synced):
    install_official(api_client, "agent-audit")
    first = execute(api_client, "interAgentMessage", message("Please check the build logs."))
    second = execute(api_client, "interAgentMessage", message("Done: password=hunter2 works", report=True))
    assert (first["outcome"], second["outcome"]) == ("unchanged", "unchanged")
    assert second["value"] == "Done: password=hunter2 works"
    assert logs(api_client, "agent-audit") == [
        'agent 22 (session 11) -> session 33 | subagent report | 28 chars | secrets: 1 assignment'
        ' | "Done: password=[REDACTED] works"',
        'agent 22 (session 11) -> session 33 | message | 28 chars | "Please check the build logs."',
    ]


def test_agent_audit_redacts_the_message_when_asked(api_client, synced):
    install_official(api_client, "agent-audit", {"redact": True, "replacement": "<secret>"})
    result = execute(api_client, "interAgentMessage", message("use AKIAIOSFODNN7EXAMPLE now"))
    assert (result["outcome"], result["value"]) == ("changed", "use <secret> now")
    plain = execute(api_client, "interAgentMessage", message("nothing secret here"))
    assert (plain["outcome"], plain["value"]) == ("unchanged", "nothing secret here")


def test_agent_audit_preview_length(api_client, synced):
    installed = install_official(api_client, "agent-audit", {"previewChars": 5})
    execute(api_client, "interAgentMessage", message("abcdefghij\n\nklm"))
    patch_settings(api_client, installed["id"], {"previewChars": 0})
    execute(api_client, "interAgentMessage", message("abcdefghij"))
    assert logs(api_client, "agent-audit") == [
        "agent 22 (session 11) -> session 33 | message | 10 chars",
        'agent 22 (session 11) -> session 33 | message | 15 chars | "abcde..."',
    ]
    response = patch_settings(api_client, installed["id"], {"previewChars": 5000})
    assert response.status_code == 400 and response.json()["error"]["field"] == "settings.previewChars"

"""`hub push`, `versions`, `deploy`, `rollback` against a real hub, and the profile file."""

from __future__ import annotations

import json

APPEND = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + {suffix!r};\n"


def test_push_installs_then_saves_drafts_and_deploys_on_request(hub, cli, tmp_path):
    key = hub.new_key()
    plugin = tmp_path / "tail.ts"
    plugin.write_text(APPEND.format(suffix=" one"))
    # Nothing runs without --deploy: a new plugin's first push installs it disabled, and says so.
    first = cli(key, "push", str(plugin), "--name", "Tail Note").stdout
    assert first.strip() == ("tail-note: installed disabled version 1 (disabled, runs nowhere: "
                             "hub push FILE --name 'Tail Note' --deploy enables it)")
    assert hub.ok(key, "GET", "plugins")["plugins"][0]["enabled"] is False
    again = json.loads(cli(key, "push", str(plugin), "--name", "Tail Note", "--json").stdout)
    assert again == {"action": "unchanged", "plugin": "tail-note", "version": 1, "live": False}
    enabled = json.loads(cli(key, "push", str(plugin), "--name", "Tail Note", "--deploy", "--json").stdout)
    assert enabled == {"action": "enabled", "plugin": "tail-note", "version": 1, "live": True}
    assert hub.ok(key, "GET", "plugins")["plugins"][0]["enabled"] is True
    plugin.write_text(APPEND.format(suffix=" two"))
    draft = cli(key, "push", str(plugin), "--name", "Tail Note").stdout
    assert draft.strip() == "tail-note: saved draft version 2 (draft: hub deploy Tail Note 2)"
    assert json.loads(cli(key, "versions", "tail-note", "--json").stdout)["live"] == 1
    deployed = json.loads(cli(key, "deploy", "tail-note", "2", "--json").stdout)
    assert deployed == {"plugin": "tail-note", "live": 2}
    plugin.write_text(APPEND.format(suffix=" three"))
    pushed = json.loads(cli(key, "push", str(plugin), "--name", "Tail Note", "--deploy", "--json").stdout)
    assert pushed == {"action": "deployed", "plugin": "tail-note", "version": 3, "live": True}
    table = cli(key, "versions", "tail-note").stdout.splitlines()
    assert table[0] == "tail-note: live version 3" and table[1].startswith("*   3")
    assert json.loads(cli(key, "rollback", "tail-note", "--json").stdout)["live"] == 2
    actions = [c["action"] for c in hub.changes(key)]
    assert actions == ["rollback", "deploy", "draft", "deploy", "draft", "enable", "install"]


def test_errors_name_what_is_wrong(hub, cli, tmp_path):
    key = hub.new_key()
    missing = json.loads(cli(key, "deploy", "nothing-here", "1", "--json", check_status=1).stdout)
    assert "no plugin named 'nothing-here'" in missing["error"]["message"]
    broken = tmp_path / "broken.ts"
    broken.write_text("globalThis.middleware.systemPrompt = async (c) => {\n  return c.systemPrompt +;\n};\n")
    refused = cli(key, "push", str(broken), "--name", "broken", check_status=1)
    assert "does not compile: line 2" in refused.stderr
    assert hub.changes(key) == []


def test_a_profile_file_gives_the_hub_and_key(hub, cli, tmp_path):
    key = hub.new_key()
    profiles = tmp_path / "config" / "hub" / "profiles.ini"
    profiles.parent.mkdir(parents=True)
    profiles.write_text(f"[default]\nurl = http://127.0.0.1:1\n\n[test]\nurl = {hub.url}\nkey = {key}\n")
    found = json.loads(cli("", "--profile", "test", "whoami", "--json", HUB_URL="").stdout)
    assert found["url"] == hub.url and found["keyFrom"].endswith("profiles.ini [test]")
    absent = cli("", "--profile", "nope", "whoami", check_status=1, HUB_URL="")
    assert "no profile [nope]" in absent.stderr
    no_key = cli("", "whoami", check_status=1, HUB_URL="")
    assert "no account key: set HUB_KEY" in no_key.stderr and key not in no_key.stderr

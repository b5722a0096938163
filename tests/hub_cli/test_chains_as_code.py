"""`hub export`, `plan`, `apply` against a real hub: round trips, one reorder, idempotence, refusals."""

from __future__ import annotations

import json
import re

import yaml

from tests.hub_cli.conftest import tree

APPEND = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + {suffix!r};\n"
FETCHER = ("globalThis.middleware.userMessageInbound = async (c) => {{ await host.fetch('http://127.0.0.1:1/'); "
           "return c.text + {suffix!r}; }};\n")


def populate(hub, key: str) -> None:
    """An account with two own plugins (one on a second version, one granted), an official one with
    settings, a disabled one, and a chain order that is not the install order."""
    first = hub.ok(key, "POST", "plugins", {"name": "Prompt Tail", "source": APPEND.format(suffix=" A"),
                                            "language": "javascript", "description": "adds A"})
    hub.ok(key, "POST", f"plugins/{first['installationId']}/versions",
           {"source": "// v2\n" + APPEND.format(suffix=" B"), "language": "typescript"})
    hub.ok(key, "POST", f"plugins/{first['installationId']}/versions/2/deploy", {})
    second = hub.ok(key, "POST", "plugins", {"name": "fetcher", "source": FETCHER.format(suffix="!"),
                                             "language": "typescript", "grant": ["host:fetch"]})
    hub.ok(key, "PATCH", f"plugins/{second['installationId']}", {"enabled": False})
    official = hub.ok(key, "POST", "plugins", {"catalog": "caveman", "settings": {"intensity": "ultra"}})
    hub.ok(key, "PUT", "chains/systemPrompt", {"order": [official["installationId"], first["installationId"]]})


def test_export_apply_export_round_trip_and_no_changes(hub, cli, tmp_path):
    source_key, empty_key = hub.new_key(), hub.new_key()
    populate(hub, source_key)
    exported, again = tmp_path / "exported", tmp_path / "again"
    cli(source_key, "export", str(exported))
    state = yaml.safe_load((exported / "hub.yaml").read_text())
    assert list(state["plugins"]) == ["caveman", "fetcher", "prompt-tail"]
    assert state["chains"]["systemPrompt"] == ["caveman", "prompt-tail"]
    assert state["plugins"]["fetcher"]["enabled"] is False
    assert (exported / "plugins" / "prompt-tail.ts").read_text().startswith("// v2")

    cli(source_key, "export", str(exported))   # a second export of an unchanged account
    assert tree(exported) == tree(tmp_path / "exported")

    planned = cli(empty_key, "plan", str(exported), check_status=2)
    assert "+ install prompt-tail" in planned.stdout
    cli(empty_key, "apply", str(exported))
    cli(empty_key, "export", str(again))
    assert tree(again) == tree(exported)
    settled = cli(empty_key, "plan", str(exported), check_status=0)
    assert settled.stdout.startswith("no changes")


def test_a_changed_order_plans_one_reorder_and_a_second_apply_writes_nothing(hub, cli, tmp_path):
    key = hub.new_key()
    populate(hub, key)
    cli(key, "export", str(tmp_path))
    path = tmp_path / "hub.yaml"
    state = yaml.safe_load(path.read_text())
    order = state["chains"]["systemPrompt"]
    path.write_text(path.read_text().replace(f"  systemPrompt:\n  - {order[0]}\n  - {order[1]}\n",
                                             f"  systemPrompt:\n  - {order[1]}\n  - {order[0]}\n"))
    planned = json.loads(cli(key, "plan", str(tmp_path), "--json", check_status=2).stdout)
    assert [(c["kind"], c["target"]) for c in planned["changes"]] == [("reorder", "systemPrompt")]

    before = len(hub.changes(key))
    applied = json.loads(cli(key, "apply", str(tmp_path), "--json").stdout)
    assert [c["kind"] for c in applied["applied"]] == ["reorder"]
    log = hub.changes(key)
    assert len(log) == before + 1 and log[0]["action"] == "reorder" and log[0]["actor"]
    assert hub.ok(key, "GET", "account/export")["chains"]["systemPrompt"] == [order[1], order[0]]

    second = cli(key, "apply", str(tmp_path))
    assert second.stdout.strip() == "no changes"
    assert len(hub.changes(key)) == before + 1


def test_new_code_is_a_new_deployed_version_and_rollback_still_works(hub, cli, tmp_path):
    key = hub.new_key()
    populate(hub, key)
    cli(key, "export", str(tmp_path))
    code = tmp_path / "plugins" / "prompt-tail.ts"
    code.write_text(code.read_text().replace(" B", " C"))
    planned = cli(key, "plan", str(tmp_path), check_status=2).stdout
    assert "prompt-tail: new version, deployed (was version 2)" in planned and '+' in planned
    cli(key, "apply", str(tmp_path))
    listed = json.loads(cli(key, "versions", "prompt-tail", "--json").stdout)
    assert listed["live"] == 3 and [v["number"] for v in listed["versions"]] == [3, 2, 1]
    rolled = json.loads(cli(key, "rollback", "Prompt Tail", "--json").stdout)
    assert rolled == {"plugin": "prompt-tail", "live": 2}


def test_a_bad_file_is_refused_with_file_line_and_field(hub, cli, tmp_path):
    key = hub.new_key()
    populate(hub, key)
    cli(key, "export", str(tmp_path))
    path = tmp_path / "hub.yaml"
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == "enabled: false")
    lines[at] = lines[at].replace("false", "maybe")
    path.write_text("\n".join(lines) + "\n")
    before = len(hub.changes(key))
    refused = cli(key, "apply", str(tmp_path), check_status=1)
    assert f"hub.yaml:{at + 1}: plugins.fetcher.enabled: expected true or false" in refused.stderr
    assert len(hub.changes(key)) == before


def test_a_setting_the_hub_refuses_names_its_line(hub, cli, tmp_path):
    key = hub.new_key()
    populate(hub, key)
    cli(key, "export", str(tmp_path))
    path = tmp_path / "hub.yaml"
    text = path.read_text()
    path.write_text(text.replace("intensity: ultra", "intensity: loud"))
    line = next(i for i, row in enumerate(path.read_text().splitlines(), 1) if "intensity: loud" in row)
    refused = json.loads(cli(key, "apply", str(tmp_path), "--json", check_status=1).stdout)
    assert refused["error"]["field"] == "plugins.caveman.settings.intensity"
    assert refused["error"]["line"] == line and "lite, full, ultra" in refused["error"]["message"]


def test_no_key_is_ever_printed(hub, cli, tmp_path):
    key = hub.new_key()
    done = cli(key, "whoami")
    bad = cli(key[:-4] + "zzzz", "export", str(tmp_path), check_status=1)
    assert key not in done.stdout + done.stderr and key[:-4] not in bad.stdout + bad.stderr
    assert "HUB_KEY" in done.stdout


def test_code_that_does_not_compile_is_refused_at_its_own_line(hub, cli, tmp_path):
    key = hub.new_key()
    populate(hub, key)
    cli(key, "export", str(tmp_path))
    code = tmp_path / "plugins" / "prompt-tail.ts"
    code.write_text(code.read_text() + "const broken = ;\n")
    lines = len(code.read_text().splitlines())
    before = len(hub.changes(key))
    refused = cli(key, "apply", str(tmp_path), check_status=1)
    assert re.search(rf"plugins/prompt-tail\.ts:{lines}:\d+: plugins\.prompt-tail\.source: ", refused.stderr)
    assert len(hub.changes(key)) == before


def test_prune_uninstalls_what_the_files_leave_out(hub, cli, tmp_path):
    key = hub.new_key()
    populate(hub, key)
    cli(key, "export", str(tmp_path))
    path = tmp_path / "hub.yaml"
    state = yaml.safe_load(path.read_text())
    del state["plugins"]["fetcher"], state["chains"]["userMessageInbound"]
    path.write_text(yaml.safe_dump(state))
    kept = cli(key, "plan", str(tmp_path), check_status=0).stdout
    assert kept.startswith("no changes") and "fetcher is installed but not in the files" in kept
    cli(key, "plan", str(tmp_path), "--prune", check_status=2)
    cli(key, "apply", str(tmp_path), "--prune")
    assert [p["plugin"] for p in hub.ok(key, "GET", "account/export")["plugins"]] == ["caveman", "prompt-tail"]
    assert hub.changes(key)[0]["action"] == "uninstall"

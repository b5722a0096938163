"""`hub plan` has the hub check every change it lists (?dryRun=true): a refused setting, a syntax error or a
type error is an error naming file, line and field once, exit 1, and the account stays exactly as it was."""

from __future__ import annotations

import json
import re

from tests.hub_cli.test_chains_as_code import populate

TYPO_TS = "// typed\nglobalThis.middleware.systemPrompt = async (c) => c.systemPrompt + c.systemPromt;\n"


def account_state(hub, key: str) -> dict:
    """What a plan must not change: the export, every installation's versions, the change log."""
    export = hub.ok(key, "GET", "account/export")
    versions = {p["plugin"]: [v["number"] for v in hub.ok(key, "GET", f"plugins/{p['installationId']}/versions")
                              ["versions"]] for p in export["plugins"]}
    return {"export": export, "versions": versions, "changes": hub.changes(key)}


def line_of(path, text: str) -> int:
    return next(i for i, row in enumerate(path.read_text().splitlines(), 1) if text in row)


def exported(hub, cli, tmp_path) -> str:
    key = hub.new_key()
    populate(hub, key)
    cli(key, "export", str(tmp_path))
    return key


def test_a_refused_setting_is_an_error_at_its_line_and_the_valid_changes_still_plan(hub, cli, tmp_path):
    key = exported(hub, cli, tmp_path)
    path = tmp_path / "hub.yaml"
    text = path.read_text().replace("intensity: ultra", "intensity: caveman")
    fetcher_at = text.index("  fetcher:")
    text = text[:fetcher_at] + text[fetcher_at:].replace("enabled: false", "enabled: true", 1)
    path.write_text(text)
    before = account_state(hub, key)

    planned = cli(key, "plan", str(tmp_path), check_status=1)
    line = line_of(path, "intensity: caveman")
    errors = [row for row in planned.stderr.splitlines() if row.startswith("hub: ")]
    assert errors == [f"hub: {path}:{line}: plugins.caveman.settings.intensity: expected one of: lite, full, ultra"]
    assert "~ fetcher: enable" in planned.stdout and "caveman" not in planned.stdout
    assert "1 change(s); 1 refused" in planned.stdout

    as_json = json.loads(cli(key, "plan", str(tmp_path), "--json", check_status=1).stdout)
    assert [(c["kind"], c["target"]) for c in as_json["changes"]] == [("enable", "fetcher")]
    assert as_json["errors"] == [{"kind": "settings", "target": "caveman", "file": str(path), "line": line,
                                  "column": None, "field": "plugins.caveman.settings.intensity",
                                  "message": "expected one of: lite, full, ultra"}]
    assert account_state(hub, key) == before

    # apply meets the same refusal, worded the same way (the field once)
    applied = cli(key, "apply", str(tmp_path), check_status=1)
    assert applied.stderr.strip().splitlines()[-1] == errors[0]


def test_a_syntax_error_is_refused_at_its_file_line_and_column(hub, cli, tmp_path):
    key = exported(hub, cli, tmp_path)
    code = tmp_path / "plugins" / "prompt-tail.ts"
    code.write_text(code.read_text() + "const broken = ;\n")
    lines = len(code.read_text().splitlines())
    before = account_state(hub, key)
    planned = cli(key, "plan", str(tmp_path), check_status=1)
    found = re.search(rf"^hub: {re.escape(str(code))}:{lines}:(\d+): plugins\.prompt-tail\.source: (.+)$",
                      planned.stderr, re.MULTILINE)
    assert found, planned.stderr
    assert int(found.group(1)) == len("const broken = ;")   # at the semicolon
    assert "prompt-tail.source" not in found.group(2) and "column" not in found.group(2)
    assert planned.stdout.startswith("0 change(s); 1 refused")
    assert account_state(hub, key) == before


def test_a_type_error_is_refused_unless_type_checking_is_off(hub, cli, tmp_path):
    key = exported(hub, cli, tmp_path)
    code = tmp_path / "plugins" / "prompt-tail.ts"
    code.write_text(TYPO_TS)
    before = account_state(hub, key)
    planned = json.loads(cli(key, "plan", str(tmp_path), "--json", check_status=1).stdout)
    assert planned["changes"] == []
    [error] = planned["errors"]
    assert (error["file"], error["line"], error["field"]) == (str(code), 2, "plugins.prompt-tail.source")
    assert error["column"] == TYPO_TS.splitlines()[1].index("systemPromt") + 1 and "systemPromt" in error["message"]
    assert account_state(hub, key) == before

    unchecked = json.loads(cli(key, "plan", str(tmp_path), "--json", "--no-typecheck", check_status=2).stdout)
    assert [c["kind"] for c in unchecked["changes"]] == ["code"] and unchecked["errors"] == []
    assert account_state(hub, key) == before


def test_a_new_plugin_that_does_not_compile_and_a_chain_that_leaves_one_out(hub, cli, tmp_path):
    key = exported(hub, cli, tmp_path)
    (tmp_path / "plugins" / "broken.js").write_text("globalThis.middleware.systemPrompt = (c) => {\n")
    path = tmp_path / "hub.yaml"
    path.write_text(path.read_text().replace("plugins:\n", "plugins:\n  broken:\n    source: plugins/broken.js\n", 1))
    before = account_state(hub, key)
    planned = json.loads(cli(key, "plan", str(tmp_path), "--json", check_status=1).stdout)
    assert [(e["kind"], e["target"], e["field"]) for e in planned["errors"]] == [
        ("install", "broken", "plugins.broken.source")]
    assert planned["errors"][0]["file"] == str(tmp_path / "plugins" / "broken.js")
    assert account_state(hub, key) == before

    (tmp_path / "plugins" / "broken.js").write_text("globalThis.middleware.systemPrompt = (c) => c.systemPrompt;\n")
    # it installs now, and joins the systemPrompt chain, which the files do not list it in
    planned = json.loads(cli(key, "plan", str(tmp_path), "--json", check_status=1).stdout)
    assert [(e["field"], e["line"]) for e in planned["errors"]] == [
        ("chains.systemPrompt", line_of(path, "systemPrompt:"))]
    assert "broken" in planned["errors"][0]["message"]
    assert account_state(hub, key) == before


def test_valid_changes_plan_as_changes_and_a_plan_after_export_is_empty(hub, cli, tmp_path):
    key = exported(hub, cli, tmp_path)
    empty = json.loads(cli(key, "plan", str(tmp_path), "--json", check_status=0).stdout)
    assert empty["changes"] == [] and empty["errors"] == []
    path = tmp_path / "hub.yaml"
    path.write_text(path.read_text().replace("intensity: ultra", "intensity: lite"))
    code = tmp_path / "plugins" / "prompt-tail.ts"
    code.write_text(code.read_text() + "// one more line\n")
    before = account_state(hub, key)
    planned = json.loads(cli(key, "plan", str(tmp_path), "--json", check_status=2).stdout)
    assert sorted(c["kind"] for c in planned["changes"]) == ["code", "settings"] and planned["errors"] == []
    assert account_state(hub, key) == before
    cli(key, "apply", str(tmp_path))
    assert cli(key, "plan", str(tmp_path), check_status=0).stdout.startswith("no changes")


def test_new_code_asking_for_a_permission_is_refused_until_the_files_grant_it(hub, cli, tmp_path):
    key = exported(hub, cli, tmp_path)
    code = tmp_path / "plugins" / "prompt-tail.ts"
    code.write_text("globalThis.middleware.systemPrompt = async (c) => {\n"
                    "  await host.fetch('http://127.0.0.1:1/');\n  return c.systemPrompt;\n};\n")
    path = tmp_path / "hub.yaml"
    text = path.read_text()
    at = text.index("  prompt-tail:")
    granted_line = text[:at].count("\n") + text[at:].split("granted: []")[0].count("\n") + 1
    before = account_state(hub, key)
    # the draft is rehearsed; its deploy would be refused: the deploy's grants come from the files
    refused = json.loads(cli(key, "plan", str(tmp_path), "--json", check_status=1).stdout)
    assert [(e["kind"], e["field"], e["line"]) for e in refused["errors"]] == [
        ("code", "plugins.prompt-tail.granted", granted_line)]
    assert "host:fetch" in refused["errors"][0]["message"]

    path.write_text(text[:at] + text[at:].replace("granted: []", "granted: [host:fetch]", 1))
    planned = json.loads(cli(key, "plan", str(tmp_path), "--json", check_status=2).stdout)
    # the grant the new code asks for is judged with the code, not against the versions the hub holds now
    assert [c["kind"] for c in planned["changes"]] == ["code", "grant"] and planned["errors"] == []
    assert account_state(hub, key) == before
    cli(key, "apply", str(tmp_path))
    assert cli(key, "plan", str(tmp_path), check_status=0).stdout.startswith("no changes")

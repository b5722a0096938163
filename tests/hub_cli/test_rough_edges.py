"""Issue 44's CLI items against a real hub: code that differs only in line endings is the same code, the
CLI type-checks and never makes code live without --deploy, `hub dev` fails when a handler fails, and
the small things (the account's name, zoned times, --watch separators, an honest export count)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from hub_cli.clock import clock_time, date_time
from plugins_app.services.execution.hook_samples import example_context
from tests.plugins_app.serving import ROOT

TS = ("globalThis.middleware.systemPrompt = async (c: SystemPromptContext) => {\n"
      "  return c.systemPrompt + ' (ok)';\n"
      "};\n")
TYPO = TS.replace("c.systemPrompt +", "c.systemPromt +")
THROWS = "globalThis.middleware.systemPrompt = async (c) => { throw new Error('boom'); };\n"
ZONED = re.compile(r"\d\d:\d\d:\d\d[+-]\d\d:\d\d")


def test_code_saved_with_crlf_exports_and_plans_as_no_change(hub, cli, tmp_path):
    """What the admin's form sends (CRLF, no final newline) is stored as LF with one: export, plan and
    push then see the same code, and a second export writes nothing."""
    key = hub.new_key()
    hub.ok(key, "POST", "plugins", {"name": "Prompt Note", "source": TS.rstrip("\n").replace("\n", "\r\n"),
                                    "language": "typescript"})
    exported = tmp_path / "exported"
    first = cli(key, "export", str(exported)).stdout
    assert first.strip() == f"{exported}: wrote 2 of 2 file(s)"
    assert (exported / "plugins" / "prompt-note.ts").read_bytes() == TS.encode()
    planned = cli(key, "plan", str(exported), check_status=0)
    assert planned.stdout.startswith("no changes")
    again = cli(key, "export", str(exported)).stdout
    assert again.strip() == f"{exported}: up to date (2 file(s), none changed)"
    # The file with CRLF again, as a Windows editor saves it: still the same code, nothing saved.
    (exported / "plugins" / "prompt-note.ts").write_bytes(TS.replace("\n", "\r\n").encode())
    cli(key, "plan", str(exported), check_status=0)
    pushed = json.loads(cli(key, "push", str(exported / "plugins" / "prompt-note.ts"), "--name", "Prompt Note",
                            "--json").stdout)
    assert pushed["action"] == "unchanged" and pushed["version"] == 1
    assert [c["action"] for c in hub.changes(key)] == ["install"]


def test_push_type_checks_by_default(hub, cli, tmp_path):
    key = hub.new_key()
    plugin = tmp_path / "typo.ts"
    plugin.write_text(TYPO)
    refused = cli(key, "push", str(plugin), "--name", "typo", check_status=1)
    assert "systemPromt" in refused.stderr
    assert hub.changes(key) == []
    saved = json.loads(cli(key, "push", str(plugin), "--name", "typo", "--no-typecheck", "--json").stdout)
    assert saved == {"action": "installed disabled", "plugin": "typo", "version": 1, "live": False}


def _dev(tmp_path, *args: str) -> subprocess.CompletedProcess:
    context = tmp_path / "ctx.json"
    context.write_text(json.dumps(example_context("systemPrompt")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    return subprocess.run([sys.executable, "-m", "hub_cli", "dev", *args, "--context", str(context)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=180)


def test_dev_type_checks_and_exits_1_when_a_handler_failed(tmp_path):
    typo, throws = tmp_path / "typo.ts", tmp_path / "throws.js"
    typo.write_text(TYPO)
    throws.write_text(THROWS)
    checked = _dev(tmp_path, str(typo))
    assert checked.returncode == 1
    assert f"{typo}:2:" in checked.stdout and "type error" in checked.stdout and "systemPromt" in checked.stdout
    unchecked = _dev(tmp_path, str(typo), "--no-typecheck")
    assert unchecked.returncode == 0 and "undefined (ok)" in unchecked.stdout
    failed = _dev(tmp_path, str(throws))
    assert failed.returncode == 1
    assert "a handler failed (throws): exit status 1" in failed.stdout


def test_watch_separates_its_runs(tmp_path):
    plugin, context = tmp_path / "p.js", tmp_path / "ctx.json"
    plugin.write_text("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' one';\n")
    context.write_text(json.dumps(example_context("systemPrompt")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    process = subprocess.Popen([sys.executable, "-m", "hub_cli", "dev", str(plugin), "--context", str(context),
                                "--watch"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if "' one'" in line or line.rstrip().endswith(" one\"") or " one" in line:
                break
        time.sleep(0.05)   # a later mtime on file systems with coarse timestamps
        plugin.write_text("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' two';\n")
        for line in process.stdout:
            lines.append(line)
            if "----- run 2" in line:
                break
        separator = lines[-1]
        assert re.fullmatch(r"----- run 2, " + ZONED.pattern + r": p\.js changed -----\n", separator), separator
    finally:
        process.terminate()
        process.wait(20)


def test_whoami_names_the_account_and_times_carry_their_zone(hub, cli, tmp_path):
    key = hub.new_key("Acme Support")
    answer = cli(key, "whoami").stdout
    assert answer.startswith(f"{hub.url}: account Acme Support (id ")
    plugin = tmp_path / "p.ts"
    plugin.write_text(TS)
    cli(key, "push", str(plugin), "--name", "zoned", "--deploy")
    row = cli(key, "versions", "zoned").stdout.splitlines()[1]
    assert re.search(r"\d{4}-\d\d-\d\d " + ZONED.pattern, row), row
    assert ZONED.fullmatch(clock_time(0.0))
    assert date_time("2026-12-05T18:00:00Z").endswith(("+00:00", ":00")) and ZONED.search(
        date_time("2026-12-05T18:00:00+01:00"))

"""README's API walk-through, run as written with bash against a hub started as `make run` starts it
(demo data loaded first), with every curl answer recorded and checked; and README stays a page a
newcomer reads in five minutes, its links and docs/'s reaching what they name."""

import json
import re
import sqlite3
import stat
import subprocess

import pytest

from .support import ROOT, DevHub, hub_env, prepare

README_LIMIT_BYTES = 12 * 1024
LINK = re.compile(r"\]\(([^)\s]+)\)")

RECORDING_CURL = """#!/usr/bin/env bash
# Records each call (arguments, answer headers, body) for the test, and answers as curl does.
n=$(ls "$CURL_LOG" | grep -c '\\.args$')
printf '%s\\0' "$@" > "$CURL_LOG/$n.args"
/usr/bin/curl -D "$CURL_LOG/$n.headers" "$@" | tee "$CURL_LOG/$n.body"
"""


def walk_through() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## API walk-through"):]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def served_hub(tmp_path_factory):
    var_dir = tmp_path_factory.mktemp("readme-var")
    prepare(var_dir)
    hub = DevHub(var_dir, var_dir / "run-dev.log")
    hub.start()
    yield hub
    hub.stop()
    hub.kill_leftovers()


def run_walk_through(hub, tmp_path):
    bin_dir, log_dir = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    log_dir.mkdir()
    curl = bin_dir / "curl"
    curl.write_text(RECORDING_CURL)
    curl.chmod(curl.stat().st_mode | stat.S_IXUSR)
    env = hub_env(hub.var_dir, hub.port)
    env.update(PATH=f"{bin_dir}:{env['PATH']}", CURL_LOG=str(log_dir))
    done = subprocess.run(["bash", "-eu", "-o", "pipefail", "-c", walk_through()], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    calls = []
    for index in range(len(list(log_dir.glob("*.args")))):
        args = (log_dir / f"{index}.args").read_text().split("\0")[:-1]
        headers = (log_dir / f"{index}.headers").read_text()
        body = (log_dir / f"{index}.body").read_text()
        status = int(headers.split()[1])
        url = next(a for a in args if a.startswith("http"))
        method = args[args.index("-X") + 1] if "-X" in args else ("POST" if "-d" in args else "GET")
        calls.append({"method": method, "path": url.split("/api/v1", 1)[1], "status": status,
                      "body": body.strip()})
    return calls


def json_of(call):
    return json.loads(call["body"])


@pytest.mark.slow
def test_the_walk_through_runs_as_written_and_every_answer_is_right(served_hub, tmp_path):
    calls = run_walk_through(served_hub, tmp_path)
    assert [(c["method"], c["path"].split("?")[0], c["status"]) for c in calls] == [
        ("GET", "/ping", 200),
        ("GET", "/hooks", 200),
        ("POST", "/plugins", 201),
        ("POST", "/plugins", 201),
        ("POST", "/hooks/systemPrompt/execute", 200),
        ("POST", "/hooks/systemPrompt/explain", 200),
        ("PUT", "/chains/systemPrompt", 200),
        ("PUT", "/chains/systemPrompt", 200),
        ("PATCH", calls[8]["path"], 200),
        ("DELETE", calls[9]["path"], 204),
        ("GET", "/cancellations", 200),
        ("GET", "/warnings", 200),
        ("GET", "/usage", 200),
    ]
    ping, hooks, caveman, polite, executed, explained, reordered, moved, patched = map(json_of, calls[:9])
    with sqlite3.connect(served_hub.var_dir / "db.sqlite3") as db:
        (acme_id,) = db.execute("SELECT id FROM accounts_account WHERE name = 'acme'").fetchone()
    assert ping == {"ok": True, "accountId": str(acme_id), "accountName": "acme"}
    assert len(hooks["hooks"]) == 14
    assert (caveman["plugin"], caveman["hooks"]) == ("caveman", ["systemPrompt"])
    assert (polite["plugin"], polite["hooks"]) == ("polite", ["systemPrompt"])
    ids = caveman["installationId"], polite["installationId"]

    # The execute answer is the one README shows.
    shown = re.search(r'# -> \{"hook": "systemPrompt", "outcome": "changed", "value": ("[^"]*")',
                      walk_through()).group(1)
    assert executed["value"] == json.loads(shown) == "You are helpful.\n\nBe terse. Say please."
    assert [(t["installationId"], t["status"]) for t in executed["trace"]] == [(ids[0], "ran"), (ids[1], "ran")]

    # Polite's matcher leaves it out of a channel's turn, in the words README shows.
    shown_matcher = re.search(r'"reason": "match", "matcher": ("(?:[^"\\]|\\.)*")', walk_through()).group(1)
    assert [(e["installationId"], e["runs"], e.get("reason")) for e in explained["chain"]] == [
        (ids[0], True, None), (ids[1], False, "match")]
    assert explained["runs"] == 1 and explained["chain"][1]["matcher"] == json.loads(shown_matcher)

    assert [e["installationId"] for e in reordered["chain"]] == [ids[1], ids[0]]
    assert [e["installationId"] for e in moved["chain"]] == [ids[0], ids[1]]
    assert calls[8]["path"] == calls[9]["path"] == f"/plugins/{ids[1]}"
    assert patched["enabled"] is False
    assert calls[9]["body"] == "204"   # the -w '%{http_code}' the README asks for
    for listing in calls[10:]:
        assert isinstance(json_of(listing), dict)


def test_readme_stays_short():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT_BYTES, f"README.md is {size} bytes; move detail to docs/ (limit {README_LIMIT_BYTES})"


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page) -> set[str]:
    return {slug(line.lstrip("#")) for line in page.read_text().splitlines() if re.match(r"#{1,6} ", line)}


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))],
                         ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_reaches_its_file_and_heading(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue   # http(s), mailto
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"

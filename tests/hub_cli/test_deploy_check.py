"""`hub deploy --check N [--max-different PCT]` against a real hub: the comparison printed, exit 2 and
nothing deployed past the limit, deployed within it."""

from __future__ import annotations

import json
import time

from tests.plugins_app.versions.test_shadow_in_place import GUARD, GUARD_V2

INBOUND = {"sessionId": "10", "channelId": None, "mediaIds": []}


def _recorded(hub, key: str, count: int) -> None:
    # Recorded calls are written by each worker's buffered writer, off the request path.
    deadline = time.monotonic() + 30
    while hub.ok(key, "GET", "recorded-calls")["count"] < count:
        assert time.monotonic() < deadline, "the calls were not recorded"
        time.sleep(0.2)


def test_deploy_with_a_check_prints_it_and_refuses_past_the_limit(hub, cli, tmp_path):
    key = hub.new_key()
    plugin = tmp_path / "guard.js"
    plugin.write_text(GUARD)
    cli(key, "push", str(plugin), "--name", "guard", "--deploy")   # a first push without --deploy installs it disabled
    plugin.write_text(GUARD_V2)
    cli(key, "push", str(plugin), "--name", "guard")   # draft version 2
    for text in ["hi", "hello", "xyz", "rm -rf /"]:
        hub.ok(key, "POST", "hooks/userMessageInbound/execute", {"context": dict(INBOUND, text=text)})
    _recorded(hub, key, 4)
    refused = cli(key, "deploy", "guard", "2", "--check", "4", "--max-different", "10", check_status=2)
    assert refused.stdout.splitlines()[0] == ("guard version 2 against 4 recorded calls: 2 same, 1 different, "
                                              "1 would no longer cancel (50.0% not the same)")
    assert "candidate: changed \"XYZ\"" in refused.stdout and "not deployed" in refused.stdout
    assert json.loads(cli(key, "versions", "guard", "--json").stdout)["live"] == 1
    as_json = json.loads(cli(key, "deploy", "guard", "2", "--check", "4", "--max-different", "10", "--json",
                             check_status=2).stdout)
    assert as_json["check"]["counts"]["different"] == 1
    deployed = json.loads(cli(key, "deploy", "guard", "2", "--check", "4", "--max-different", "50",
                              "--json").stdout)
    assert deployed["live"] == 2 and deployed["check"]["calls"] == 4
    bad = cli(key, "deploy", "guard", "1", "--max-different", "101", check_status=1)
    assert "--max-different" in bad.stderr

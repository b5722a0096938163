"""`hub dev` runs a plugin file on the hub's runtime with no server: the spec's example plugins (the project's
copies, and the spec's own files when they are beside the checkout) give the outcome the same plugin gives
installed in a real hub; --replay, --watch and --allow-fetch."""

from __future__ import annotations

import http.server
import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest

from plugins_app.services.execution.hook_samples import example_context
from tests.plugins_app.serving import ROOT
from tests.spec_examples import OWN, Examples

FILES = OWN.names()   # the spec's are the same names (test_spec_examples.py checks)
RM_ROOT = {**example_context("sshCommandSending"), "command": "rm -rf /"}


def comparable(run: dict) -> dict:
    """What must agree between the hub and the local run: outcome, value, cancel reason, each status."""
    return {"outcome": run["outcome"], "value": run["value"], "reason": (run["cancellation"] or {}).get("reason"),
            "statuses": [t["status"] for t in run["trace"]]}


def on_the_hub(hub, examples: Examples, name: str, hook: str, context: dict) -> dict:
    key = hub.new_key()
    installed = hub.ok(key, "POST", "plugins", {"name": name.removesuffix(".ts"), "source": examples.read(name),
                                                "language": "typescript"})
    if installed["permissions"]:
        hub.ok(key, "POST", f"plugins/{installed['installationId']}/grant", {"grant": installed["permissions"]})
    return hub.ok(key, "POST", f"hooks/{hook}/execute", {"context": context})


def local(run: dict) -> dict:
    return {"outcome": run["outcome"], "value": run["after"], "cancellation": run["cancellation"],
            "trace": run["trace"]}


@pytest.mark.parametrize("name", FILES)
def test_each_spec_example_does_locally_what_it_does_installed(hub, cli, examples, name):
    done = cli("unused", "dev", str(examples.path(name)), "--samples", "--json", check_status=None)
    answer = json.loads(done.stdout)
    assert answer["runs"], answer
    # hub dev exits 1 exactly when a handler failed (locally, ssh is a stand-in that throws).
    assert done.returncode == (1 if answer["failed"] else 0), answer
    for run in answer["runs"]:
        served = on_the_hub(hub, examples, name, run["hook"], example_context(run["hook"]))
        assert comparable(local(run)) == comparable(served), run["hook"]


def test_a_cancel_is_the_same_locally_and_installed(hub, cli, tmp_path, examples):
    context = tmp_path / "ctx.json"
    context.write_text(json.dumps(RM_ROOT))
    name = "rm-guard-sshCommandSending.ts"
    run = json.loads(cli("unused", "dev", str(examples.path(name)), "--context", str(context), "--json").stdout)["runs"][0]
    served = on_the_hub(hub, examples, name, "sshCommandSending", RM_ROOT)
    assert run["outcome"] == "cancelled" and comparable(local(run)) == comparable(served)


def test_replay_runs_the_local_file_on_a_recorded_cancel(hub, cli, tmp_path, examples):
    key = hub.new_key()
    source = examples.read("rm-guard-sshCommandSending.ts")
    hub.ok(key, "POST", "plugins", {"name": "rm guard", "source": source, "language": "typescript"})
    hub.ok(key, "POST", "hooks/sshCommandSending/execute", {"context": RM_ROOT})
    entry = hub.ok(key, "GET", "cancellations")["results"][0]
    edited = tmp_path / "rm-guard.ts"
    edited.write_text(source.replace('return tools.cancel("refusing to delete the root filesystem");',
                                     'return { command: "echo refused" };'))
    same = json.loads(cli(key, "dev", str(examples.path("rm-guard-sshCommandSending.ts")), "--replay", entry["id"],
                          "--json").stdout)
    assert same["recorded"]["reason"] == same["runs"][0]["cancellation"]["reason"] == entry["reason"]
    now = json.loads(cli(key, "dev", str(edited), "--replay", entry["id"], "--json").stdout)
    assert now["recorded"]["reason"] == entry["reason"]
    assert now["runs"][0]["outcome"] == "changed" and now["runs"][0]["after"]["command"] == "echo refused"
    text = cli(key, "dev", str(edited), "--replay", entry["id"]).stdout
    assert text.startswith(f"recorded: cancelled by rm-guard v1: {entry['reason']}\nnow:      sshCommandSending: changed")


def test_watch_runs_again_when_the_file_is_saved(tmp_path):
    plugin, context = tmp_path / "p.js", tmp_path / "ctx.json"
    plugin.write_text("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' one';\n")
    context.write_text(json.dumps(example_context("systemPrompt")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    process = subprocess.Popen([sys.executable, "-m", "hub_cli", "dev", str(plugin), "--context", str(context),
                                "--watch", "--json"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    outputs: queue.Queue = queue.Queue()

    def read() -> None:
        buffer = ""
        for line in process.stdout:
            buffer += line
            if line.startswith("}"):
                outputs.put(json.loads(buffer))
                buffer = ""
    threading.Thread(target=read, daemon=True).start()
    try:
        first = outputs.get(timeout=60)
        assert first["runs"][0]["after"].endswith(" one")
        time.sleep(0.05)   # a later mtime on file systems with coarse timestamps
        plugin.write_text("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' two!';\n")
        second = outputs.get(timeout=60)
        assert second["runs"][0]["after"].endswith(" two!")
    finally:
        process.terminate()
        process.wait(20)


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"from loopback")

    def log_message(self, *args):
        pass


def test_fetch_reaches_loopback_only_with_allow_fetch(cli, tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    plugin = tmp_path / "fetcher.js"
    plugin.write_text("globalThis.middleware.systemPrompt = async (c) => {\n"
                      f"  const r = await host.fetch('http://127.0.0.1:{server.server_port}/x');\n"
                      "  return c.systemPrompt + ' ' + (await r.text());\n};\n")
    try:
        refused = json.loads(cli("unused", "dev", str(plugin), "--samples", "--json", check_status=1).stdout)["runs"][0]
        allowed = json.loads(cli("unused", "dev", str(plugin), "--samples", "--allow-fetch", "--json").stdout)["runs"][0]
    finally:
        server.shutdown()
    assert refused["trace"][0]["status"] == "error" and "--allow-fetch" in refused["trace"][0]["warning"]
    assert [(c["member"], c["args"][0]) for c in refused["hostCalls"]] == [
        ("host.fetch", f"http://127.0.0.1:{server.server_port}/x")]
    assert allowed["outcome"] == "changed" and allowed["after"].endswith(" from loopback")


def test_a_warning_names_the_authors_line_in_typescript_and_javascript(cli, tmp_path):
    typescript = tmp_path / "broken.ts"
    typescript.write_text("interface Unused {\n  a: string;\n}\n\n"
                          "globalThis.middleware.systemPrompt = async (c: { systemPrompt: string }) => {\n"
                          "  const missing: any = undefined;\n"
                          "  return missing.field + c.systemPrompt;\n};\n")
    javascript = tmp_path / "broken.js"
    javascript.write_text("globalThis.middleware.systemPrompt = async (c) => {\n  null.x;\n};\n")
    ts_run = json.loads(cli("unused", "dev", str(typescript), "--samples", "--json", "--no-typecheck",
                            check_status=1).stdout)["runs"][0]
    js_run = json.loads(cli("unused", "dev", str(javascript), "--samples", "--json", check_status=1).stdout)["runs"][0]
    assert ts_run["trace"][0]["status"] == "error" and ts_run["trace"][0]["warning"].endswith("(line 7)")
    assert js_run["trace"][0]["warning"].endswith("(line 2, column 8)")


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Records each request; /redirect answers 302 to the server's `to`, anything else 200."""

    def do_GET(self):
        self.server.seen.append(self.path)
        if self.path.endswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", self.server.to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"reached " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _recorder(to: str = "") -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen, server.to = [], to
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_allow_fetch_follows_no_redirect_honours_no_proxy_and_reaches_loopback_only(cli, tmp_path):
    # As the hub's host.fetch: a 30x is the answer, proxy variables are ignored, other addresses refused.
    target, proxy = _recorder(), _recorder()
    origin = _recorder(to=f"http://127.0.0.1:{target.server_port}/target")
    plugin = tmp_path / "redirected.js"
    plugin.write_text("globalThis.middleware.systemPrompt = async (c) => {\n"
                      f"  const r = await host.fetch('http://127.0.0.1:{origin.server_port}/redirect');\n"
                      "  let far; try { await host.fetch('http://192.0.2.1/'); far = 'fetched'; }\n"
                      "  catch (e) { far = String(e && e.message || e); }\n"
                      "  return JSON.stringify({status: r.status, location: r.headers['location'], far});\n};\n")
    proxy_url = f"http://127.0.0.1:{proxy.server_port}"
    try:
        run = json.loads(cli("unused", "dev", str(plugin), "--samples", "--allow-fetch", "--json",
                             HTTP_PROXY=proxy_url, http_proxy=proxy_url, HTTPS_PROXY=proxy_url,
                             ALL_PROXY=proxy_url, NO_PROXY="", no_proxy="").stdout)["runs"][0]
    finally:
        for server in (target, proxy, origin):
            server.shutdown()
    assert run["trace"][0]["status"] == "ran", run
    answer = json.loads(run["after"])
    assert answer["status"] == 302 and answer["location"] == f"http://127.0.0.1:{target.server_port}/target"
    assert "192.0.2.1 is not a loopback address" in answer["far"]
    assert origin.seen == ["/redirect"] and target.seen == [] and proxy.seen == []


def test_the_stand_in_fetches_by_the_hubs_rules_in_process(monkeypatch):
    from hub_cli.standins import StandIns
    from plugins_app.runtime.web.chain import HostError

    target, proxy = _recorder(), _recorder()
    origin = _recorder(to=f"http://127.0.0.1:{target.server_port}/target")
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.server_port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    try:
        host = StandIns(allow_fetch=True)
        answer = host(None, "fetch", [f"http://127.0.0.1:{origin.server_port}/redirect"])
        with pytest.raises(HostError, match="only http:// and https://"):
            host(None, "fetch", ["file:///etc/passwd"])
        with pytest.raises(HostError, match="method must be one of"):
            host(None, "fetch", [f"http://127.0.0.1:{origin.server_port}/", {"method": "TRACE"}])
    finally:
        for server in (target, proxy, origin):
            server.shutdown()
    assert answer["status"] == 302 and answer["headers"]["location"].endswith("/target")
    assert origin.seen == ["/redirect"] and target.seen == [] and proxy.seen == []

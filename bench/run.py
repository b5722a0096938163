"""Benchmarks of the hook engine and the execute API, each printed as a ratio to its baseline.

Run with `make bench`. Nothing here is a test: figures vary by machine; compare ratios.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

APPEND = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ' [{}]';"
CONTEXT = {"sessionId": "18446744073709551615", "agentId": "2", "sessionKind": "direct",
           "systemPrompt": "You are a helpful agent."}
# A handler for one agent only: CONTEXT's agent "2" is not it, so the seam skips it before any engine.
ELSEWHERE = APPEND + "\nglobalThis.middleware.match = {{ systemPrompt: {{ agentId: {{ in: ['7', '9'] }} }} }};"


def engine_figures(n: int = 5000) -> dict:
    """In-engine throughput on one core: the same 3-handler chain run n times inside one engine
    process, then through the pool (IPC + JSON included)."""
    from plugins_app.runtime.engine.supervisor import local_supervisor
    from plugins_app.runtime.tables.hooks import HOOKS
    from plugins_app.runtime.web.chain import Handler, run_chain
    from plugins_app.runtime.web.tier import tier_for

    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {max(allowed)})   # the engine process inherits it: "per core" literally
    supervisor = local_supervisor(engines=1, lane=0)
    pool = tier_for(supervisor.describe())
    try:
        handlers = []
        for i in range(3):
            compiled = pool.compile(APPEND.format(i), "javascript")
            handlers.append(Handler(str(i + 1), f"p{i}", f"h{i}", compiled["code"]))
        spec = HOOKS["systemPrompt"]
        run_chain(pool, "bench", spec, handlers, CONTEXT)   # warm: isolate + compartments
        reply = pool.request("bench", {
            "op": "bench", "account": "bench", "hook": "systemPrompt", "n": n, "budgetMs": 5000,
            "context": CONTEXT, "host": {"session": None, "workspace": True, "ssh": False},
            "handlers": [{"id": h.installation_id, "hash": h.code_hash} for h in handlers]}, silence_limit=120)
        in_engine = reply["n"] / reply["seconds"]
        cpu_us = reply["cpuSeconds"] / reply["n"] * 1e6
        started = time.perf_counter()
        m = n // 5
        for _ in range(m):
            run_chain(pool, "bench", spec, handlers, CONTEXT)
        via_pool = m / (time.perf_counter() - started)
        return {"in_engine_chains_per_s": in_engine, "in_engine_cpu_us": cpu_us, "pool_chains_per_s": via_pool}
    finally:
        pool.shutdown()
        supervisor.stop()
        os.sched_setaffinity(0, allowed)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    def __init__(self, port: int, key: str):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.key = key

    def post(self, path: str, body: dict | None = None) -> tuple[int, dict, float]:
        data = json.dumps(body or {})
        started = time.perf_counter()
        self.conn.request("POST", path, data, self.headers)
        response = self.conn.getresponse()
        payload = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        self.last_timing = response.getheader("Server-Timing")
        if response.status >= 300:
            raise SystemExit(f"{path} answered {response.status}: {payload[:500]!r}")
        return response.status, json.loads(payload or b"{}"), elapsed

    def put(self, path: str, body: dict) -> dict:
        self.conn.request("PUT", path, json.dumps(body), self.headers)
        response = self.conn.getresponse()
        return json.loads(response.read())


def manage(env: dict, *args: str) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True).stdout


def rest_figures(rounds: int = 2000) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="hub-bench-"))
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{workdir / 'bench.sqlite3'}", DJANGO_DEBUG="0",
               HUB_METERING_FLUSH_SECONDS="2", HUB_ENGINE_PROCESSES="1")
    manage(env, "migrate", "--noinput")
    key = manage(env, "create_api_key", "bench").strip().splitlines()[-1]
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "middleware_hub.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1",
         "--log-level", "warning"], cwd=ROOT, env=env)
    try:
        client = _wait_for(port, key)
        ids = []
        for i in range(3):
            client.conn.request("POST", "/api/v1/plugins", json.dumps(
                {"name": f"bench {i}", "source": APPEND.format(i), "language": "javascript"}), client.headers)
            ids.append(json.loads(client.conn.getresponse().read())["installationId"])
        execute = lambda: client.post("/api/v1/hooks/systemPrompt/execute", {"context": CONTEXT})
        bare = lambda: client.post("/api/v1/ping")
        for _ in range(200):
            execute(), bare()
        chain_ms, bare_ms, inside_ms = [], [], []
        for _ in range(rounds):   # interleaved, so both see the same machine
            status, body, ms = execute()
            assert status == 200 and body["outcome"] == "changed", body
            chain_ms.append(ms)
            inside_ms.append(float(client.last_timing.split(",")[0].split("dur=")[1]))   # the chain entry
            bare_ms.append(bare()[2])
        # First call after a plugin change: the order flips, the cache must reload.
        after_change = []
        for i in range(20):
            client.put("/api/v1/chains/systemPrompt", {"order": ids[::-1] if i % 2 == 0 else ids})
            after_change.append(execute()[2])
        # A new account's first call: a new isolate (SES + lockdown) and three compartments.
        first_calls = []
        for i in range(9):
            new_key = manage(env, "create_api_key", f"fresh-{i}").strip().splitlines()[-1]
            fresh = Client(port, new_key)
            for j in range(3):
                fresh.conn.request("POST", "/api/v1/plugins", json.dumps(
                    {"name": f"p{j}", "source": APPEND.format(j), "language": "javascript"}), fresh.headers)
                fresh.conn.getresponse().read()
            first_calls.append(fresh.post("/api/v1/hooks/systemPrompt/execute", {"context": CONTEXT})[2])
        return {"chain": chain_ms, "bare": bare_ms, "inside": inside_ms, "after_change": after_change,
                "first_calls": first_calls, **matcher_figures(port, env, key, rounds // 2)}
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def _account_with(port: int, env: dict, name: str, sources: list[str]) -> Client:
    client = Client(port, manage(env, "create_api_key", name).strip().splitlines()[-1])
    for i, source in enumerate(sources):
        client.conn.request("POST", "/api/v1/plugins", json.dumps(
            {"name": f"{name} {i}", "source": source, "language": "javascript"}), client.headers)
        client.conn.getresponse().read()
    return client


def matcher_figures(port: int, env: dict, key: str, rounds: int) -> dict:
    """Matchers (issue 41): a chain of 5 none of which match, against a bare call; and a chain where 1 of
    5 matches, against that 1 alone. Interleaved, so each pair sees the same machine."""
    # Fresh connections once every plugin is installed: an idle one may have been closed meanwhile.
    none_match = Client(port, _account_with(port, env, "none-of-5", [ELSEWHERE.format(i) for i in range(5)]).key)
    one_of_five = Client(port, _account_with(port, env, "one-of-5", [ELSEWHERE.format(i) for i in range(4)]
                                             + [APPEND.format(4)]).key)
    alone = Client(port, _account_with(port, env, "one-alone", [APPEND.format(4)]).key)
    base = Client(port, key)

    def bare() -> tuple[int, dict, float]:
        return base.post("/api/v1/ping")
    calls = {name: (lambda c=client: c.post("/api/v1/hooks/systemPrompt/execute", {"context": CONTEXT}))
             for name, client in (("none", none_match), ("one_of_five", one_of_five), ("alone", alone))}
    for _ in range(200):
        for call in calls.values():
            call()
        bare()
    found: dict[str, list[float]] = {"none": [], "none_bare": [], "one_of_five": [], "alone": []}
    for _ in range(rounds):
        status, body, ms = calls["none"]()
        assert status == 200 and body["outcome"] == "unchanged" and {t["status"] for t in body["trace"]} == {"skipped"}
        found["none"].append(ms)
        found["none_bare"].append(bare()[2])
        found["one_of_five"].append(calls["one_of_five"]()[2])
        found["alone"].append(calls["alone"]()[2])
    return {"match_" + name: values for name, values in found.items()}


def _wait_for(port: int, key: str) -> Client:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            client = Client(port, key)
            if client.post("/api/v1/ping")[0] == 200:
                return client
        except OSError:
            time.sleep(0.2)
    raise SystemExit("gunicorn did not start")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ratio_row(name: str, measured: list[float], baseline: list[float], target: str) -> list[tuple]:
    p50, base = statistics.median(measured), statistics.median(baseline)
    return [(name, f"{p50:.2f} ms vs {base:.2f} ms", target, f"{p50 / base:.2f}x")]


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "middleware_hub.settings")
    engine = engine_figures()
    rest = rest_figures()
    p50c, p99c = statistics.median(rest["chain"]), pct(rest["chain"], 0.99)
    p50b, p99b = statistics.median(rest["bare"]), pct(rest["bare"], 0.99)
    rows = [
        ("in-engine 3-handler chains/s (1 core)", f"{engine['in_engine_chains_per_s']:,.0f}", "target >= 4,000",
         f"{engine['in_engine_chains_per_s'] / 4000:.2f}x target"),
        ("  engine CPU per chain (all its threads)", f"{engine['in_engine_cpu_us']:,.0f} us", "",
         f"{engine['in_engine_cpu_us'] / (1e6 / engine['in_engine_chains_per_s']):.2f}x wall"),
        ("pool 3-handler chains/s (IPC included)", f"{engine['pool_chains_per_s']:,.0f}", "",
         f"{engine['pool_chains_per_s'] / engine['in_engine_chains_per_s']:.2f}x in-engine"),
        ("REST p50 execute vs bare", f"{p50c:.2f} ms vs {p50b:.2f} ms", "target <= 1.5x", f"{p50c / p50b:.2f}x"),
        ("  of which execute_hook (p50, Server-Timing)", f"{statistics.median(rest['inside']):.2f} ms", "",
         f"{statistics.median(rest['inside']) / p50c:.0%} of execute"),
        ("REST p99 execute vs bare", f"{p99c:.2f} ms vs {p99b:.2f} ms", "", f"{p99c / p99b:.2f}x"),
        ("first call after a plugin change (median)", f"{statistics.median(rest['after_change']):.2f} ms",
         "target <= 30 ms", f"{statistics.median(rest['after_change']) / p50b:.1f}x bare p50"),
        ("new account's first call (median)", f"{statistics.median(rest['first_calls']):.1f} ms",
         "target <= 10 ms", f"{statistics.median(rest['first_calls']) / p50b:.0f}x bare p50"),
        *_ratio_row("REST p50 execute, 5 handlers none matching, vs bare", rest["match_none"],
                    rest["match_none_bare"], "target <= 1.15x"),
        *_ratio_row("REST p50 execute, 1 of 5 matching, vs that 1 alone", rest["match_one_of_five"],
                    rest["match_alone"], ""),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value, target, ratio in rows:
        print(f"{name:<{width}}  {value:>24}  {ratio:>18}  {target}")


if __name__ == "__main__":
    main()

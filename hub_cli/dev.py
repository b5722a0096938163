"""`hub dev`: run a plugin file on the hub's own runtime (the same engines, SES lockdown, compartments,
budgets and fail-open as production) with no server and no database, and show its trace."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hub_cli import lines
from hub_cli.files import EXTENSIONS
from hub_cli.local_kv import LocalKv
from hub_cli.standins import StandIns
from plugins_app.runtime.config import DEFAULT_BUDGET_MS, DEFAULT_CPU_MS
from plugins_app.runtime.engine.supervisor import Supervisor, local_supervisor
from plugins_app.runtime.matching import words
from plugins_app.runtime.matching.declare import MatcherError, declare
from plugins_app.runtime.matching.evaluate import check
from plugins_app.runtime.protocol import FAILED_STATUSES
from plugins_app.runtime.tables.context import ContextError, validate_context
from plugins_app.runtime.tables.hooks import HOOK_NAMES, HOOKS
from plugins_app.runtime.tables.permissions import derive_permissions
from plugins_app.runtime.web.chain import Handler, run_chain
from plugins_app.runtime.web.tier import Tier, tier_for
from plugins_app.services.execution.hook_samples import example_context

ACCOUNT_KEY = "hub-dev"


class DevError(Exception):
    """The file does not compile, or the hook or context is not usable (the message says which)."""


@dataclass
class Compiled:
    path: Path
    code: str
    code_hash: str
    hooks: list[str]
    permissions: list[str]
    source: str = ""
    matchers: dict[str, Any] = field(default_factory=dict)   # {hook: matcher}, checked as an install checks it

    def line_table(self) -> dict[int, int] | None:
        """Compiled line -> the file's line; None for JavaScript (run as written, lines are the file's)."""
        return lines.typescript_lines(self.source) if self.path.suffix == ".ts" else None


@dataclass
class Outcome:
    hook: str
    outcome: str
    before: Any
    after: Any
    cancellation: dict | None
    trace: list[dict]
    host_calls: list[dict] = field(default_factory=list)
    duration_ms: float = 0.0

    @property
    def failed(self) -> list[str]:
        """The plugins whose handler failed (threw, timed out, answered the wrong shape)."""
        return [t["plugin"] for t in self.trace if t["status"] in FAILED_STATUSES]

    def as_dict(self) -> dict:
        return {"hook": self.hook, "outcome": self.outcome, "before": self.before, "after": self.after,
                "cancellation": self.cancellation, "trace": self.trace, "hostCalls": self.host_calls,
                "durationMs": round(self.duration_ms, 3)}


class Runner:
    """One engine supervisor for the session (started once: --watch reruns reuse it)."""

    def __init__(self) -> None:
        self.supervisor: Supervisor = local_supervisor(engines=1, lane=0)
        self.tier: Tier = tier_for(self.supervisor.describe())

    def close(self) -> None:
        self.tier.shutdown()
        self.supervisor.stop()

    def compile(self, path: Path, typecheck: bool = True) -> Compiled:
        """The server's install-time checks: it compiles (and type-checks, as the admin does by default),
        it defines hooks, each one is a hook."""
        if path.suffix not in EXTENSIONS:
            raise DevError(f"{path}: expected a .ts or .js file")
        source = path.read_text(encoding="utf-8")
        if not source.strip():
            raise DevError(f"{path}: the file is empty")
        result = self.tier.compile(source, EXTENSIONS[path.suffix], typecheck)
        if result.get("errors"):
            first, more = result["errors"][0], len(result["errors"]) - 1
            kind = "type error" if result.get("stage") == "types" else "error"
            also = f" (and {more} more)" if more else ""
            hint = " (--no-typecheck runs it anyway)" if kind == "type error" else ""
            raise DevError(f"{path}:{first.get('line')}:{first.get('column')}: {kind}: {first.get('message')}"
                           f"{also}{hint}")
        unknown = [h for h in result["hooks"] if h not in HOOK_NAMES]
        if unknown:
            raise DevError(f"{path}: middleware.{unknown[0]} is not a hook; the hooks are: {', '.join(HOOK_NAMES)}")
        if not result["hooks"]:
            raise DevError(f"{path}: the plugin defines no hooks: assign handlers to globalThis.middleware.<hook>")
        try:
            matchers = declare(result.get("match"), result["hooks"], HOOKS)
        except MatcherError as exc:
            raise DevError(f"{path}: {exc.path}: {exc.message}") from None
        code = lines.with_shim(result["code"])
        return Compiled(path, code, hashlib.sha256(code.encode()).hexdigest(),
                        [h for h in HOOK_NAMES if h in result["hooks"]], derive_permissions(result["hostMembers"]),
                        source, matchers)

    def run(self, compiled: Compiled, hook: str, context: Any, *, settings: dict | None = None,
            allow_fetch: bool = False, say=lambda line: None, kv: LocalKv | None = None) -> Outcome:
        if hook not in HOOKS:
            raise DevError(f"unknown hook {hook!r}; the hooks are: {', '.join(HOOK_NAMES)}")
        if hook not in compiled.hooks:
            raise DevError(f"{compiled.path} defines no {hook} handler (it defines: {', '.join(compiled.hooks)})")
        spec = HOOKS[hook]
        try:
            clean = validate_context(spec, context)
        except ContextError as exc:
            raise DevError(f"context.{exc.field}: {exc.message}" if exc.field != "context" else str(exc)) from None
        config = settings or {}
        # A new hash per settings, as the hub's chain cache makes: the engine keeps one compartment per hash.
        digest = hashlib.sha256(f"{compiled.code_hash}:{json.dumps(config, sort_keys=True)}".encode()).hexdigest()
        handler = Handler("1", compiled.path.stem, digest[:24], compiled.code, config,
                          frozenset(compiled.permissions))   # locally every permission it asks for is granted
        verdict = check(compiled.matchers.get(hook), clean)
        if not verdict.matched:   # as the hub's seam does: skipped before the engine, nothing run
            return Outcome(hook, "unchanged", spec.value_of(clean), spec.value_of(clean), None, [
                {"plugin": handler.plugin, "status": "skipped", "reason": "match", "changed": False, "durationMs": 0.0,
                 "warning": None, "logs": [], "matcher": words.hooks({hook: compiled.matchers[hook]})[hook],
                 "failed": verdict.failed}])
        host = StandIns(allow_fetch=allow_fetch, say=say, kv=kv)
        started = time.perf_counter()
        result = run_chain(self.tier, ACCOUNT_KEY, spec, [handler], clean, host=host, trace_values=True,
                           budget_ms=DEFAULT_BUDGET_MS, cpu_ms=DEFAULT_CPU_MS)
        took = (time.perf_counter() - started) * 1000
        c = result.cancellation
        marked = any(t.warning and lines.MARK.search(t.warning) for t in result.trace)
        table = compiled.line_table() if marked else None
        return Outcome(hook, result.outcome, spec.value_of(clean), result.value,
                       None if c is None else {"plugin": c.plugin, "reason": c.reason},
                       [{"plugin": t.plugin, "status": t.status, "changed": t.changed,
                         "durationMs": round(t.duration_ms, 3), "warning": lines.place(t.warning, table),
                         "logs": t.logs} for t in result.trace], host.calls, took)


def sample_context(hook: str) -> dict:
    """The hook's realistic sample: the table the admin's Try page and the API docs start from."""
    return example_context(hook)


def render(result: Outcome) -> str:
    """The trace as a person reads it: status, time, logs, warnings, the value's before and after."""
    lines = [f"{result.hook}: {result.outcome} in {result.duration_ms:.1f} ms"]
    for t in result.trace:
        lines.append(f"  {t['plugin']}: {t['status']}{' (changed)' if t['changed'] else ''} {t['durationMs']:.1f} ms")
        for log in t["logs"]:
            lines.append(f"    [{log.get('level')}] {log.get('message')}" if isinstance(log, dict) else f"    {log}")
        if t["warning"]:
            lines.append(f"    warning: {t['warning']}")
        if t.get("reason") == "match":
            lines.append(f"    its matcher ({t['matcher']}) does not hold: {t['failed']}")
    for call in result.host_calls:
        lines.append(f"  would call {call['member']}({json.dumps(call['args'])[1:-1][:200]})")
    if result.cancellation:
        lines.append(f"  cancelled: {result.cancellation['reason']}")
    lines += _diff(result.before, result.after)
    return "\n".join(lines)


def _diff(before: Any, after: Any) -> list[str]:
    if before == after:
        return ["  value: unchanged"]
    if isinstance(before, dict) and isinstance(after, dict):
        return [f"  {key}: {json.dumps(before.get(key))} -> {json.dumps(after.get(key))}"
                for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]
    return [f"  before: {json.dumps(before)}", f"  after:  {json.dumps(after)}"]


def replay_entry(client, entry_id: str) -> dict:
    """A recorded cancel from the hub (its hook, context, plugin and reason), found in the cancel log."""
    page = 1
    while page <= 50:
        answer = client.get("cancellations", page=page, pageSize=500)
        for row in answer["results"]:
            if row["id"] == str(entry_id):
                return row
        if not answer.get("next"):
            break
        page += 1
    raise DevError(f"no cancel-log entry {entry_id} in this account")


def watch(paths: list[Path], rerun, poll_seconds: float = 0.3) -> None:
    """Calls `rerun` whenever one of `paths` is saved (its mtime or size changes), until Ctrl-C."""
    def stamp() -> list[tuple[float, int]]:
        return [(p.stat().st_mtime, p.stat().st_size) if p.exists() else (0.0, 0) for p in paths]
    last = stamp()
    while True:
        time.sleep(poll_seconds)
        now = stamp()
        if now != last:
            last = now
            rerun()

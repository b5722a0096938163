"""Install-time work inside an engine: transpile (and, when asked, type-check) a plugin, then load it
once in a probe isolate."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from typing import cast

from plugins_app.runtime import positions
from plugins_app.runtime.engine import jsassets
from plugins_app.runtime.engine.compile_queue import CompileBusy, FairQueue
from plugins_app.runtime.engine.isolate import (
    LOAD_TIMEOUT_SECONDS,
    Isolate,
    IsolateLost,
    JSEvalException,
    JSOOMException,
    MiniRacer,
)
from plugins_app.runtime.protocol import JsonObject, Limits
from plugins_app.runtime.tables.error_hints import explain
from plugins_app.runtime.tables.sdk_types import middleware_d_ts

# The TypeScript isolate holds the compiler, the ES2022 library and the SDK, parsed once (about 150 MiB
# warm); a check past these bounds is stopped, and the isolate started afresh for the next one.
TYPESCRIPT_MEMORY_MB = 768
# One check's bound, enforced by terminating the TypeScript isolate's work (it is JavaScript, so
# termination takes): a tenant's pathological types cost it this long, and another account waiting
# behind it no more than this (compile_queue.py hands turns round-robin).
TYPECHECK_SECONDS = 3
# The trivial check that tells a stopped isolate is still usable (~0.3 s warm on a busy machine): it
# is part of the stopped tenant's turn, so it is kept short.
RECOVERY_CHECK_SECONDS = 1.5
MAX_TYPE_ERRORS = 50
# The compiled code's last line: a source map back to the author's source, with where each hook's
# handler is assigned (runtime/positions.py reads it).
SOURCE_MAP_PREFIX = "\n//# sourceMappingURL=data:application/json;base64,"
# The most JSON a plugin's middleware.match may read as (the hub's own bounds on a matcher keep it far
# smaller): a bigger one is refused before Python parses it.
MAX_MATCH_JSON_CHARS = 256 * 1024


class Compiler:
    """TypeScript in its own isolate, and a probe isolate that loads the result to find its hooks.
    Both are apart from the isolate that runs chains, so a compile never holds up a chain."""

    def __init__(self, memory_mb: int, limits: Limits):
        self.memory_mb, self.limits = memory_mb, limits   # the probe isolate's, as the engine's own
        self.typescript: MiniRacer | None = None
        self.typecheck_ready = False        # the ES2022 library is in the TypeScript isolate
        self.sdk: str | None = None         # the middleware.d.ts it holds
        self.probe: Isolate | None = None
        self.queue = FairQueue()

    async def compile(self, req: JsonObject) -> JsonObject:
        """{errors} (with "stage": "types" when only the type check failed), {code, hooks, hostMembers, match},
        or {busy, message, retryAfter} when the request got no turn (compile_queue.py)."""
        try:
            async with self.queue.turn(str(req.get("account") or "")):
                return await self._compile(req)
        except CompileBusy as busy:
            return busy.reply()

    async def _compile(self, req: JsonObject) -> JsonObject:
        transpiled = await self._transpile(req)
        if transpiled["errors"]:
            return {"errors": _explained(transpiled["errors"])}
        if req.get("typecheck") and req.get("language") == "typescript":
            type_errors = await self._typecheck(req["source"])
            if type_errors:
                return {"errors": type_errors, "stage": "types"}
        transpiled["code"] = with_source_map(transpiled)
        result = await self._probe(transpiled)
        result["errors"] = _explained(result["errors"])
        return result

    async def _typescript(self) -> MiniRacer:
        if self.typescript is None:
            mr = MiniRacer()
            mr.set_hard_memory_limit(TYPESCRIPT_MEMORY_MB * 1024 * 1024)
            await asyncio.wait_for(mr.eval_cancelable(jsassets.typescript_source()), 30)
            await asyncio.wait_for(mr.eval_cancelable(jsassets.compiler_source()), 5)
            await asyncio.wait_for(mr.eval_cancelable(jsassets.typecheck_source()), 5)
            self.typescript = mr
        return self.typescript

    async def _transpile(self, req: JsonObject) -> JsonObject:
        typescript = await self._typescript()
        file_name = "plugin.ts" if req.get("language") == "typescript" else "plugin.js"
        try:
            raw = await asyncio.wait_for(typescript.eval_cancelable(
                f"__compile({json.dumps(req['source'])}, {json.dumps(file_name)})"), 10)
        except TimeoutError:
            return {"errors": [_error("the source took too long to parse")]}
        transpiled: JsonObject = json.loads(cast(str, raw))   # compiler.js answers JSON text
        return transpiled

    async def _typecheck(self, source: str) -> list[JsonObject]:
        """TypeScript's errors for `source` against the ES2022 library and middleware.d.ts."""
        typescript = await self._typescript()
        try:
            if not self.typecheck_ready:
                await asyncio.wait_for(typescript.eval_cancelable(
                    f"__typecheckInit({json.dumps(jsassets.typescript_libs())})"), 30)
                self.typecheck_ready = True
            sdk = middleware_d_ts()
            if sdk != self.sdk:   # the tables are the process's own: this happens once
                version = hashlib.sha256(sdk.encode()).hexdigest()[:16]
                await asyncio.wait_for(typescript.eval_cancelable(
                    f"__typecheckSdk({json.dumps(sdk)}, {json.dumps(version)})"), 10)
                # The first check parses the library and the SDK (seconds on a busy machine): done
                # here, under the set-up's bound, so no plugin's check is charged for it.
                await asyncio.wait_for(typescript.eval_cancelable("__typecheck('export {};', 1)"), 30)
                self.sdk = sdk
            raw = await asyncio.wait_for(typescript.eval_cancelable(
                f"__typecheck({json.dumps(source)}, {MAX_TYPE_ERRORS})"), TYPECHECK_SECONDS)
        except (TimeoutError, JSOOMException) as exc:
            await self._recover_typescript(overran_time=isinstance(exc, TimeoutError))
            what = f"took over {TYPECHECK_SECONDS} s" if isinstance(exc, TimeoutError) else \
                f"needed over {TYPESCRIPT_MEMORY_MB} MiB"
            return [_error(f"type checking {what}; check the source with tsc and the SDK locally")]
        errors: list[JsonObject] = json.loads(cast(str, raw))
        return errors

    async def _recover_typescript(self, *, overran_time: bool) -> None:
        """After a check was stopped: keep the warm isolate when a trivial check still answers (a new
        one costs the next caller seconds of parsing the library), else start afresh next time."""
        if overran_time and self.typescript is not None:
            try:
                await asyncio.wait_for(self.typescript.eval_cancelable("__typecheck('export {};', 1)"),
                                       RECOVERY_CHECK_SECONDS)
                return
            except (TimeoutError, JSOOMException, JSEvalException):
                pass
        await self._drop_typescript()

    async def _drop_typescript(self) -> None:
        mr, self.typescript = self.typescript, None
        self.typecheck_ready, self.sdk = False, None
        if mr is not None:
            mr.close()

    async def _probe(self, transpiled: JsonObject) -> JsonObject:
        code = transpiled["code"]
        if self.probe is None:
            self.probe = await Isolate(self.memory_mb, self.limits).start()
        probe_id = "probe-" + hashlib.sha256(code.encode()).hexdigest()[:16]
        try:
            installation = json.dumps(["probe", probe_id, "probe", code, {}])
            hooks = json.loads(cast(str, await self.probe.eval(   # __hub.load answers JSON text
                f"__hub.load.call({json.dumps(installation)})", LOAD_TIMEOUT_SECONDS)))
            match = await self._declared_match(probe_id)
            await self.probe.eval(f"__hub.unload('probe', {json.dumps(probe_id)}); 1", LOAD_TIMEOUT_SECONDS)
        except TimeoutError:
            await self._drop_probe()
            return {"errors": [_error(f"top-level code did not finish within {LOAD_TIMEOUT_SECONDS:g} s")]}
        except IsolateLost:
            await self._drop_probe()
            return {"errors": [_error("top-level code ran out of memory")]}
        except JSEvalException as exc:
            return {"errors": [_in_source(_load_error(exc), transpiled.get("sourceMap"))]}
        try:
            # Code scheduled as a microtask at load time (async IIFE) runs after the eval above.
            await self.probe.eval("1", LOAD_TIMEOUT_SECONDS)
        except (TimeoutError, IsolateLost):
            await self._drop_probe()
            return {"errors": [_error("top-level code never settles (runaway async work)")]}
        if isinstance(match, dict) and "error" in match:
            return {"errors": [_error(match["error"])]}
        return {"errors": [], "code": code, "hooks": hooks, "hostMembers": transpiled["hostMembers"], "match": match}

    async def _declared_match(self, probe_id: str) -> object:
        """What the plugin assigned to middleware.match, read as JSON (checked by the hub, not here):
        None when nothing, {"error": ...} when it does not read as JSON (a cycle, a getter that throws)."""
        assert self.probe is not None
        try:
            text = await self.probe.eval(f"__hub.declaredMatch('probe', {json.dumps(probe_id)})", LOAD_TIMEOUT_SECONDS)
        except JSEvalException as exc:
            first = (str(exc).splitlines() or ["error"])[0]
            return {"error": f"middleware.match does not read as JSON data: {first[:300]}"}
        if not isinstance(text, str):
            return None
        if len(text) > MAX_MATCH_JSON_CHARS:
            return {"error": f"middleware.match is over {MAX_MATCH_JSON_CHARS // 1024} KiB of JSON; a matcher is a few conditions"}
        return json.loads(text)

    async def _drop_probe(self) -> None:
        probe, self.probe = self.probe, None
        if probe is not None:
            await probe.close()   # closing stops runaway work too



def with_source_map(transpiled: JsonObject) -> str:
    """The code with its source map (TypeScript's, or an empty one for JavaScript) as its last line,
    carrying where each hook's handler is assigned. A bundle that brings its own map keeps it."""
    code: str = transpiled["code"]
    if "//# sourceMappingURL=data:" in code[-200_000:]:
        return code
    source_map = transpiled.get("sourceMap") or {"version": 3, "sources": ["plugin.js"], "names": [], "mappings": ""}
    source_map = {**source_map, "x_hub_hooks": transpiled.get("hooksAt") or {}}
    encoded = base64.b64encode(json.dumps(source_map, separators=(",", ":")).encode()).decode()
    return code.rstrip("\n") + SOURCE_MAP_PREFIX + encoded + "\n"


def _in_source(error: JsonObject, source_map: JsonObject | None) -> JsonObject:
    """A load error's line, in the transpiled code, led back to the TypeScript source's."""
    if not source_map:
        return error
    found = positions.parse(source_map).original(int(error["line"]), int(error["column"]))
    return {**error, "line": found["line"], "column": found["column"]} if found else error


def _error(message: str) -> JsonObject:
    return {"message": message, "line": 1, "column": 1}


def _load_error(exc: JSEvalException) -> JsonObject:
    text = str(exc)
    first = text.splitlines()[0] if text else "error"
    # V8 reports "<anonymous>:LINE: Message" for top-level failures; keep the position.
    line, column = 1, 1
    parts = first.split(":", 2)
    if len(parts) == 3 and parts[1].strip().isdigit():
        line, first = int(parts[1]), parts[2].strip()
    # That line is SES's evaluator's; the stack's first frame in the plugin's own code is the one meant.
    frame = positions.PLUGIN_FRAME.search(text)
    if frame:
        line, column = int(frame.group(1)), int(frame.group(2))
    return {"message": first[:500], "line": line, "column": column}


def _explained(errors: list[JsonObject]) -> list[JsonObject]:
    """Errors with a hint added where the message is one authors often meet (tables/error_hints.py)."""
    for error in errors:
        error["message"] = explain(error["message"])
    return errors

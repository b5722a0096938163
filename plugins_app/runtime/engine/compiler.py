"""Install-time work inside an engine: transpile a plugin, then load it once in a probe isolate."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import cast

from py_mini_racer import MiniRacer
from py_mini_racer._exc import JSEvalException

from plugins_app.runtime.engine import jsassets
from plugins_app.runtime.engine.isolate import LOAD_TIMEOUT_SECONDS, Isolate, IsolateLost
from plugins_app.runtime.protocol import JsonObject, Limits
from plugins_app.runtime.tables.error_hints import explain


class Compiler:
    """TypeScript in its own isolate, and a probe isolate that loads the result to find its hooks.
    Both are apart from the isolate that runs chains, so a compile never holds up a chain."""

    def __init__(self, memory_mb: int, limits: Limits):
        self.memory_mb, self.limits = memory_mb, limits   # the probe isolate's, as the engine's own
        self.typescript: MiniRacer | None = None
        self.probe: Isolate | None = None
        self.lock = asyncio.Lock()

    async def compile(self, req: JsonObject) -> JsonObject:
        async with self.lock:
            transpiled = await self._transpile(req)
            result = {"errors": transpiled["errors"]} if transpiled["errors"] else await self._probe(transpiled)
            for error in result["errors"]:
                error["message"] = explain(error["message"])
            return result

    async def _transpile(self, req: JsonObject) -> JsonObject:
        if self.typescript is None:
            self.typescript = MiniRacer()
            await asyncio.wait_for(self.typescript.eval_cancelable(jsassets.typescript_source()), 30)
            await asyncio.wait_for(self.typescript.eval_cancelable(jsassets.compiler_source()), 5)
        file_name = "plugin.ts" if req.get("language") == "typescript" else "plugin.js"
        try:
            raw = await asyncio.wait_for(self.typescript.eval_cancelable(
                f"__compile({json.dumps(req['source'])}, {json.dumps(file_name)})"), 10)
        except TimeoutError:
            return {"errors": [_error("the source took too long to parse")]}
        transpiled: JsonObject = json.loads(cast(str, raw))   # compiler.js answers JSON text
        return transpiled

    async def _probe(self, transpiled: JsonObject) -> JsonObject:
        code = transpiled["code"]
        if self.probe is None:
            self.probe = await Isolate(self.memory_mb, self.limits, _no_host).start()
        probe_id = "probe-" + hashlib.sha256(code.encode()).hexdigest()[:16]
        try:
            installation = json.dumps(["probe", probe_id, "probe", code, {}])
            hooks = json.loads(cast(str, await self.probe.eval(   # __hub.load answers JSON text
                f"__hub.load.call({json.dumps(installation)})", LOAD_TIMEOUT_SECONDS)))
            await self.probe.eval(f"__hub.unload('probe', {json.dumps(probe_id)}); 1", LOAD_TIMEOUT_SECONDS)
        except TimeoutError:
            await self._drop_probe()
            return {"errors": [_error(f"top-level code did not finish within {LOAD_TIMEOUT_SECONDS:g} s")]}
        except IsolateLost:
            await self._drop_probe()
            return {"errors": [_error("top-level code ran out of memory")]}
        except JSEvalException as exc:
            return {"errors": [_load_error(exc)]}
        try:
            # Code scheduled as a microtask at load time (async IIFE) runs after the eval above.
            await self.probe.eval("1", LOAD_TIMEOUT_SECONDS)
        except (TimeoutError, IsolateLost):
            await self._drop_probe()
            return {"errors": [_error("top-level code never settles (runaway async work)")]}
        return {"errors": [], "code": code, "hooks": hooks, "hostMembers": transpiled["hostMembers"]}

    async def _drop_probe(self) -> None:
        probe, self.probe = self.probe, None
        if probe is not None:
            await probe.close()   # closing stops runaway work too


async def _no_host(raw: str) -> str:
    return json.dumps({"ok": False, "value": None, "error": "host members are not available at load time"})


def _error(message: str) -> JsonObject:
    return {"message": message, "line": 1, "column": 1}


def _load_error(exc: JSEvalException) -> JsonObject:
    text = str(exc)
    first = text.splitlines()[0] if text else "error"
    # V8 reports "<anonymous>:LINE: Message" for top-level failures; keep the position.
    line = 1
    parts = first.split(":", 2)
    if len(parts) == 3 and parts[1].strip().isdigit():
        line, first = int(parts[1]), parts[2].strip()
    return {"message": first[:500], "line": line, "column": 1}

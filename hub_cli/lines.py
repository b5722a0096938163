"""`hub dev`'s warnings name the author's line: a shim appended to the plugin's compiled code adds the
line V8's stack gives to an error a handler throws, and for TypeScript a source map (TypeScript's own
transpiler, run here with sourceMap on) turns the compiled line back into the .ts file's line.

The hub's own warnings do not carry lines (its harness reports `name: message`); this is local only."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from plugins_app.runtime.positions import decode_vlq

# Appended to the compiled code, so it runs in the plugin's compartment after the plugin assigned its
# handlers: each handler is wrapped to add "(line L, column C)" of the innermost plugin frame of what
# it throws. The plugin's frames are the ones V8 names "eval at ..., <anonymous>:L:C)".
SHIM = r"""
;(() => {
  const m = globalThis.middleware;
  if (!m || typeof m !== "object") return;
  for (const name of Object.keys(m)) {
    const handler = m[name];
    if (typeof handler !== "function") continue;
    try {
      m[name] = async function (...args) {
        try { return await handler.apply(this, args); } catch (e) {
          try {
            const at = /, <anonymous>:(\d+):(\d+)\)/.exec(String(e && e.stack));
            if (at && typeof e.message === "string") e.message += ` (@hub-dev-line ${at[1]}:${at[2]})`;
          } catch (ignored) { /* a hostile error object keeps its message */ }
          throw e;
        }
      };
    } catch (ignored) { /* a frozen middleware object runs unwrapped */ }
  }
})();
"""
MARK = re.compile(r" \(@hub-dev-line (\d+):(\d+)\)")


def with_shim(code: str) -> str:
    return code + "\n" + SHIM


def line_table(mappings: str) -> dict[int, int]:
    """{compiled line: source line} (both 1-based) from a source map's `mappings`: each compiled line's
    first segment that names a source position."""
    table, source_line = {}, 0
    for index, line in enumerate(mappings.split(";")):
        first = None
        for segment in filter(None, line.split(",")):
            fields = decode_vlq(segment)
            if len(fields) >= 4:
                source_line += fields[2]
                if first is None:
                    first = source_line
        if first is not None:
            table[index + 1] = first + 1
    return table


@cache
def _typescript() -> Any:
    from plugins_app.runtime.engine.isolate import MiniRacer
    from plugins_app.runtime.engine.jsassets import typescript_source

    context = MiniRacer()
    context.eval(typescript_source())
    return context


def typescript_lines(source: str) -> dict[int, int]:
    """Compiled line -> .ts line for `source`, as the hub's compiler transpiles it (same options, plus a map)."""
    context = _typescript()
    context.eval(f"globalThis.__source = {json.dumps(source)};")
    raw = context.eval("JSON.stringify(ts.transpileModule(globalThis.__source, {fileName: 'plugin.ts', "
                       "compilerOptions: {target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, "
                       "sourceMap: true}}).sourceMapText)")
    return line_table(json.loads(json.loads(raw))["mappings"])


def place(warning: str | None, table: dict[int, int] | None) -> str | None:
    """The warning with the shim's mark turned into "(line L)" of the author's file."""
    if not warning:
        return warning
    found = MARK.search(warning)
    if found is None:
        return warning
    line, column = int(found.group(1)), int(found.group(2))
    if table is not None:
        mapped = table.get(line) or next((table[k] for k in sorted(table, reverse=True) if k < line), None)
        where = f" (line {mapped})" if mapped else ""
    else:
        where = f" (line {line}, column {column})"
    return warning[:found.start()] + where + warning[found.end():]

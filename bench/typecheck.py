"""Type-checking a 2,000-line TypeScript plugin against the SDK, cold and warm, in the compiler's isolate.

Run with `.venv/bin/python bench/typecheck.py`. Prints milliseconds and the warm check's ratio to
transpiling the same source (what a check cost before type checking). Issue 30's target: warm <= 1.5 s.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HELPER = """
function helper{n}(text: string, limit: number): string {{
  const words = text.split(" ").map((w) => w.trim()).filter((w) => w.length > 0);
  const counts: Record<string, number> = {{}};
  for (const w of words) {{ counts[w] = (counts[w] ?? 0) + 1; }}
  if (words.length > limit) {{ return words.slice(0, limit).join(" "); }}
  return Object.entries(counts).map(([w, k]) => `${{w}}:${{k}}`).join(",") + String(limit);
}}
"""


def plugin(lines: int = 2000) -> str:
    parts, n = [], 0
    while sum(p.count("\n") for p in parts) < lines - 4:
        parts.append(HELPER.format(n=n))
        n += 1
    parts.append("globalThis.middleware.systemPrompt = async (c, tools) => helper0(c.systemPrompt, 40);\n")
    return "".join(parts)


async def measure(runs: int) -> dict:
    from plugins_app.runtime.engine.compiler import Compiler
    from plugins_app.runtime.protocol import DEFAULT_LIMITS

    compiler = Compiler(128, DEFAULT_LIMITS)
    source = plugin()
    request = {"source": source, "language": "typescript"}
    started = time.perf_counter()
    assert not await compiler._typecheck(source), "the benchmark's plugin type-checks"
    cold = time.perf_counter() - started
    warm, transpile = [], []
    for k in range(runs):
        edited = source + f"// edit {k}\n"   # a new version of the file each time, as an author's edits are
        started = time.perf_counter()
        await compiler._typecheck(edited)
        warm.append(time.perf_counter() - started)
        started = time.perf_counter()
        await compiler._transpile({**request, "source": edited})
        transpile.append(time.perf_counter() - started)
    # V8 keeps optimising TypeScript's checker over the first few checks: "warm" is the later half's median.
    settled = warm[len(warm) // 2:]
    return {"lines": source.count("\n"), "cold": cold, "first": warm[0], "warm": statistics.median(settled),
            "transpile": statistics.median(transpile[len(transpile) // 2:])}


def main() -> None:
    figures = asyncio.run(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 12))
    print(f"{figures['lines']}-line plugin: type check cold {figures['cold'] * 1000:.0f} ms (TypeScript, library "
          f"and SDK loaded), next {figures['first'] * 1000:.0f} ms, warm {figures['warm'] * 1000:.0f} ms (median of "
          f"the later half); transpile only "
          f"{figures['transpile'] * 1000:.0f} ms; warm check / transpile = {figures['warm'] / figures['transpile']:.1f}x")


if __name__ == "__main__":
    main()

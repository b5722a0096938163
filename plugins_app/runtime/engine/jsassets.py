"""Locates and caches the JavaScript the engine loads: SES, web API polyfills, TypeScript (and its ES2022
library for type checking), the harness, the compiler."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

JS_DIR = Path(__file__).resolve().parents[1] / "js"
NODE_MODULES = JS_DIR / "node_modules"


class MissingAsset(RuntimeError):
    pass


def _read(path: Path) -> str:
    if not path.exists():
        raise MissingAsset(
            f"{path} is missing: run `make install` (npm ci in {JS_DIR}) to fetch the engine's JavaScript")
    return path.read_text(encoding="utf-8") + "\n;1"


@cache
def ses_source() -> str:
    return _read(NODE_MODULES / "ses" / "dist" / "ses.umd.min.js")


@cache
def typescript_source() -> str:
    return _read(NODE_MODULES / "typescript" / "lib" / "typescript.js")


@cache
def harness_source() -> str:
    return _read(JS_DIR / "harness.js")


@cache
def guards_source() -> str:
    """Bounds on native work V8 cannot interrupt; evaluated before lockdown() in execution isolates only."""
    return _read(JS_DIR / "guards.js")


@cache
def compiler_source() -> str:
    return _read(JS_DIR / "compiler.js")


@cache
def typecheck_source() -> str:
    return _read(JS_DIR / "typecheck.js")


@cache
def typescript_libs() -> str:
    """The ES2022 library's declaration files, as JSON {file name: text}: lib.es2022.d.ts and every file
    it names with `/// <reference lib=...>`, read from the pinned TypeScript (typecheck.js's lib)."""
    lib_dir = NODE_MODULES / "typescript" / "lib"
    texts: dict[str, str] = {}
    todo = ["es2022"]
    while todo:
        name = f"lib.{todo.pop()}.d.ts"
        if name in texts:
            continue
        path = lib_dir / name
        if not path.exists():
            raise MissingAsset(f"{path} is missing: run `make install` (npm ci in {JS_DIR})")
        texts[name] = path.read_text(encoding="utf-8")
        todo += _LIB_REFERENCE.findall(texts[name])
    return json.dumps(texts)


_LIB_REFERENCE = re.compile(r'^///\s*<reference\s+lib="([^"]+)"', re.MULTILINE)


@cache
def web_polyfills_source() -> str:
    """npm polyfills for web APIs V8 lacks, pinned in js/package.json. Each is a script that sets its
    API on the start compartment's global; the harness hardens them and hands them to compartments."""
    return "\n;\n".join(_read(NODE_MODULES / path) for path in (
        "fast-text-encoding/text.min.js",   # TextEncoder, TextDecoder
        "base-64/base64.js",                # base64.encode / decode: btoa and atob
    )) + "\n;1"


@cache
def web_polyfills_bundle_source() -> str:
    """structuredClone, URL, AbortController and the SHA digests, bundled from npm by js/build-polyfills.sh.
    Evaluated before lockdown(): core-js keeps its internal state by assigning over WeakMap methods,
    which frozen intrinsics refuse; lockdown then freezes what the bundle captured like any intrinsic."""
    path = JS_DIR / "dist" / "web-polyfills.js"
    if not path.exists():
        raise MissingAsset(f"{path} is missing: run `make js` (npm ci and npm run build in {JS_DIR})")
    return path.read_text(encoding="utf-8") + "\n;1"

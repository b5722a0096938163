"""Locates and caches the JavaScript the engine loads: SES, web API polyfills, TypeScript, the harness, the compiler."""

from __future__ import annotations

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
def compiler_source() -> str:
    return _read(JS_DIR / "compiler.js")


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

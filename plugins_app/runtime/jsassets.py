"""Locates and caches the JavaScript the engine loads: SES, web API polyfills, TypeScript, the harness, the compiler."""

from __future__ import annotations

from functools import cache
from pathlib import Path

JS_DIR = Path(__file__).resolve().parent / "js"
NODE_MODULES = JS_DIR / "node_modules"


class MissingAsset(RuntimeError):
    pass


def _read(path: Path) -> str:
    if not path.exists():
        raise MissingAsset(
            f"{path} is missing: run `make install` (npm ci in {JS_DIR}) to fetch the engine's JavaScript")
    return path.read_text(encoding="utf-8")


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

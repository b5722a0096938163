"""TypeScript declarations for plugin authors, generated from the hook table and the host surface."""

from __future__ import annotations

import re
from functools import lru_cache

from plugins_app.runtime.tables.hooks import HOOKS, Field, HookSpec
from plugins_app.runtime.tables.members import HOST_MEMBERS, OFFER_BY_TOP, OFFER_SUMMARY, HostMember

_SCALARS = {"id": "string", "string": "string", "number": "number", "integer": "number",
            "boolean": "boolean", "string[]": "string[]", "id[]": "string[]"}


_PRELUDE = """\
// Middleware Hub plugin SDK: generated from the hub's hook table and host surface.
// Served at GET /api/v1/sdk/middleware.d.ts. Plugins are scripts: assign handlers to
// globalThis.middleware.<hook>; each gets (context, tools) and its host object as `host`.

type LogLevel = "debug" | "info" | "warn" | "error";

/** Returned by tools.cancel(reason): return it to veto (cancellable hooks only). */
interface CancelToken { readonly __cancelToken: unique symbol }

interface Tools {
  /** Veto this hook: return the token. The reason is cut to 500 characters. */
  cancel(reason?: string): CancelToken;
}

interface FetchInit { method?: string; headers?: Record<string, string>; body?: string }
interface FetchResponse {
  readonly status: number;
  readonly ok: boolean;
  readonly headers: Record<string, string>;
  text(): Promise<string>;
  json(): Promise<unknown>;
}
interface LlmMessage { role: "system" | "user" | "assistant"; content: string }
interface LlmOptions {
  system?: string; temperature?: number; top_p?: number; max_tokens?: number; stop?: string | string[];
  seed?: number; response_format?: Record<string, unknown>;
}
interface LlmRequest extends LlmOptions { messages: LlmMessage[] }
interface SshResult {
  exitCode: number; output: string; errorOutput: string; isTruncated: boolean; durationMs: number;
}

/** What host.kv stores: any JSON value. */
type KvValue = null | boolean | number | string | KvValue[] | { [key: string]: KvValue };
interface KvPage { keys: Array<{ key: string; size: number; expiresAt: string | null }>; cursor: string | null }
interface KvIncrOptions { ttlSeconds?: number; max?: number }
/** host.kv.incr's answer when the step would have passed `max`: nothing changed, `value` is the counter. */
interface KvRefused { ok: false; value: number }

/** A handler's result: the value, or a promise of it. */
type Result<T> = T | Promise<T>;

/** Conditions on one context field, all of which must hold (on a list field: some element). */
interface ValueMatch<T> {
  equals?: T;
  in?: T[];
  not?: ValueMatch<T>;
  any?: ValueMatch<T>[];
  all?: ValueMatch<T>[];
}
/** A text field's conditions: also substrings, prefixes and RE2 patterns (no backreferences or lookaround). */
interface TextMatch<T> extends ValueMatch<T> {
  /** Contains this text (or any of these). */
  includes?: string | string[];
  /** Starts with this text (or any of these). */
  startsWith?: string | string[];
  /** An RE2 regular expression, searched anywhere in the value (anchor it with ^ and $). */
  regex?: string;
  /** Compare without case, here and in what this object nests. */
  ignoreCase?: boolean;
  not?: TextMatch<T>;
  any?: TextMatch<T>[];
  all?: TextMatch<T>[];
}

// The web globals a plugin's compartment has (type-check with "lib": ["es2022"], without "dom").
declare var self: typeof globalThis;
declare var global: typeof globalThis;
declare var console: {
  log(...data: unknown[]): void; info(...data: unknown[]): void; debug(...data: unknown[]): void;
  warn(...data: unknown[]): void; error(...data: unknown[]): void;
};
declare function queueMicrotask(callback: () => void): void;
/** Fires only within the handler's invocation; every pending timer is cleared when it ends. */
declare function setTimeout<A extends unknown[]>(callback: (...args: A) => void, delay?: number, ...args: A): number;
declare function clearTimeout(id: number | undefined): void;
declare function atob(data: string): string;
declare function btoa(data: string): string;
declare class TextEncoder {
  readonly encoding: "utf-8";
  encode(input?: string): Uint8Array;
}
declare class TextDecoder {
  constructor(label?: "utf-8" | "utf8");
  readonly encoding: "utf-8";
  decode(input?: ArrayBufferView | ArrayBuffer): string;
}
/** Milliseconds since the engine's isolate started; monotonic, millisecond resolution. */
declare var performance: { readonly timeOrigin: number; now(): number };
declare function structuredClone<T>(value: T, options?: { lossy?: boolean; json?: boolean }): T;
declare class URLSearchParams {
  constructor(init?: string | Record<string, string> | [string, string][] | URLSearchParams);
  readonly size: number;
  append(name: string, value: string): void;
  delete(name: string, value?: string): void;
  get(name: string): string | null;
  getAll(name: string): string[];
  has(name: string, value?: string): boolean;
  set(name: string, value: string): void;
  sort(): void;
  forEach(callback: (value: string, name: string, parent: URLSearchParams) => void): void;
  keys(): IterableIterator<string>;
  values(): IterableIterator<string>;
  entries(): IterableIterator<[string, string]>;
  [Symbol.iterator](): IterableIterator<[string, string]>;
  toString(): string;
}
declare class URL {
  constructor(url: string | URL, base?: string | URL);
  static canParse(url: string | URL, base?: string | URL): boolean;
  static parse(url: string | URL, base?: string | URL): URL | null;
  hash: string; host: string; hostname: string; href: string; readonly origin: string; password: string;
  pathname: string; port: string; protocol: string; search: string; readonly searchParams: URLSearchParams;
  username: string;
  toJSON(): string;
  toString(): string;
}
declare class AbortSignal {
  readonly aborted: boolean;
  readonly reason: any;
  onabort: ((event: { type: "abort" }) => void) | null;
  addEventListener(type: "abort", listener: (event: { type: "abort" }) => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: (event: { type: "abort" }) => void): void;
  throwIfAborted(): void;
  static abort(reason?: any): AbortSignal;
  static any(signals: Iterable<AbortSignal>): AbortSignal;
}
declare class AbortController {
  readonly signal: AbortSignal;
  abort(reason?: any): void;
}
type IntegerTypedArray = Int8Array | Uint8Array | Uint8ClampedArray | Int16Array | Uint16Array | Int32Array |
  Uint32Array | BigInt64Array | BigUint64Array;
declare var crypto: {
  /** Fills the array (at most 65,536 bytes) from the engine's generator, seeded from os.urandom. */
  getRandomValues<T extends IntegerTypedArray>(array: T): T;
  randomUUID(): `${string}-${string}-${string}-${string}-${string}`;
  readonly subtle: {
    digest(algorithm: "SHA-1" | "SHA-256" | "SHA-384" | "SHA-512" | { name: string },
           data: ArrayBuffer | ArrayBufferView): Promise<ArrayBuffer>;
  };
};
"""


# A global the prelude declares: `declare var NAME: TYPE;`, `declare function NAME(...)...;`, `declare class NAME`;
# and the members of `declare var NAME: {` ... `};` one indent in (console.log, crypto.randomUUID).
_GLOBAL = re.compile(r"^declare (var|function|class) (\w+)(.*?)(?: \{)?$", re.MULTILINE)
_OBJECT_GLOBAL = re.compile(r"^declare var (\w+): \{\n(.*?)\n\};", re.MULTILINE | re.DOTALL)
_MEMBER = re.compile(r"^(?:readonly )?(\w+)(.*)$")
_ALIASES = {"self", "global"}   # names of globalThis: nothing to list through them
_KINDS = {"var": "variable", "function": "function", "class": "class"}


def web_globals() -> list[dict[str, str]]:
    """The web globals the SDK declares, for the editor's completion: label, kind, declaration."""
    return [{"label": name, "type": _KINDS[kind],
             "detail": (name + rest.rstrip(";")).strip().removesuffix(":") + (" {…}" if rest.endswith(":") else "")}
            for kind, name, rest in _GLOBAL.findall(_PRELUDE) if name not in _ALIASES]


def web_global_members() -> dict[str, list[dict[str, str]]]:
    """The members of the object globals the SDK declares (console, crypto), for the editor's completion."""
    found: dict[str, list[dict[str, str]]] = {}
    for name, body in _OBJECT_GLOBAL.findall(_PRELUDE):
        for line in body.splitlines():
            if not line.startswith("  ") or line.startswith("   "):
                continue   # a comment's continuation or a nested object's member
            for part in line.strip().split("; "):
                member = _MEMBER.match(part)
                if member:
                    found.setdefault(name, []).append({"label": member.group(1), "detail": (
                        member.group(1) + member.group(2)).rstrip(";").replace("{", "{…}")})
    return found


def _ts_type(f: Field) -> str:
    text = " | ".join(f'"{c}"' for c in f.choices) if f.choices else _SCALARS[f.type]
    return text + " | null" if f.nullable else text


def context_type_name(spec: HookSpec) -> str:
    """The declared name of a hook's context type, e.g. TodoAddedContext."""
    return f"{_pascal(spec.name)}Context"


def _context(spec: HookSpec) -> str:
    lines = [f"/** {spec.summary} */", f"interface {context_type_name(spec)} {{"]
    for f in spec.fields:
        lines.append(f"  readonly {f.name}{'?' if f.optional else ''}: {_ts_type(f)};")
    lines.append("}")
    return "\n".join(lines)


def _returns(spec: HookSpec) -> str:
    mutable = spec.mutable_fields()
    if not mutable:
        value = "void"
    elif len(mutable) == 1:
        value = _ts_type(mutable[0])
    else:
        value = "{ " + " ".join(f"{f.name}?: {_ts_type(f)};" for f in mutable) + " }"
    return f"{value} | CancelToken" if spec.cancellable else value


def _interface_name(group: str) -> str:
    """host.session.peer's interface is HostSessionPeer; host's own is Host."""
    return "Host" + "".join(_pascal(part) for part in group.split(".") if part)


def _host_interfaces(group: str, members: list[HostMember]) -> list[str]:
    """The interface of `group` ("" for host itself), after those of the objects nested in it, all
    built from the members' dotted names: a member is declared in its parent's interface, a nested
    object is a property of its parent, and a top-level group the host plan may leave out is optional."""
    prefix = group + "." if group else ""
    own = [m for m in members if m.name.rpartition(".")[0] == group]
    nested: list[str] = []   # the child groups, in the order of their first member
    for m in members:
        if m.name.startswith(prefix) and m.name.count(".") > prefix.count("."):
            child = m.name[len(prefix):].split(".", 1)[0]
            if child not in nested:
                nested.append(child)
    blocks: list[str] = []
    lines = [f"interface {_interface_name(group)} {{"]
    for m in own:
        lines += [f"  /** {m.doc} */", f"  {m.signature};"]
    for child in nested:
        blocks += _host_interfaces(prefix + child, members)
        offer = OFFER_BY_TOP[child] if not group else "always"
        if offer != "always":
            hooks = next(m for m in members if m.top == child).hooks()
            lines.append(f"  /** {OFFER_SUMMARY[offer]}: {', '.join(hooks)}. */")
        lines.append(f"  readonly {child}{'?' if offer != 'always' else ''}: {_interface_name(prefix + child)};")
    return blocks + ["\n".join(lines + ["}"])]


def _host() -> str:
    return "\n\n".join(_host_interfaces("", list(HOST_MEMBERS)))


def _pascal(name: str) -> str:
    return name[0].upper() + name[1:]


_TEXT_TYPES = ("id", "string", "string[]", "id[]")


def _match_type(f: Field) -> str:
    """A field's matcher type: TextMatch for text (ids are strings), ValueMatch for the rest; a list
    field's conditions are on its elements, and a null or absent field can be matched as null."""
    element = {"string[]": "string", "id[]": "string"}.get(f.type, _SCALARS[f.type])
    value = " | ".join(f'"{c}"' for c in f.choices) if f.choices else element
    if f.nullable or f.optional:
        value += " | null"
    return f"{'TextMatch' if f.type in _TEXT_TYPES else 'ValueMatch'}<{value}>"


def match_type_name(spec: HookSpec) -> str:
    """The declared name of a hook's matcher type, e.g. SshCommandSendingMatch."""
    return f"{_pascal(spec.name)}Match"


def _matcher(spec: HookSpec) -> str:
    name = match_type_name(spec)
    lines = [f"/** When a {spec.name} handler wants to run: conditions on its context, all of which must hold. */",
             f"interface {name} {{"]
    lines += [f"  {f.name}?: {_match_type(f)};" for f in spec.fields]
    lines += [f"  any?: {name}[];", f"  all?: {name}[];", f"  not?: {name};", "}"]
    return "\n".join(lines)


@lru_cache(maxsize=1)
def middleware_d_ts() -> str:
    """The whole declaration file."""
    contexts = "\n\n".join(_context(spec) for spec in HOOKS.values())
    handlers = "\n".join(
        f"  {spec.name}?: (context: {_pascal(spec.name)}Context, tools: Tools) => Result<{_returns(spec)}>;"
        for spec in HOOKS.values())
    matchers = "\n\n".join(_matcher(spec) for spec in HOOKS.values())
    match_map = "\n".join(f"  {spec.name}?: {match_type_name(spec)};" for spec in HOOKS.values())
    handlers += ("\n  /** When each handler wants to run, checked before it is started (a handler without one "
                 "runs on every call). */\n  match?: MiddlewareMatch;")
    return (f"{_PRELUDE}\n{contexts}\n\n{matchers}\n\n"
            f"/** Matchers by hook: only for hooks the plugin handles. */\ninterface MiddlewareMatch {{\n{match_map}\n}}\n\n"
            f"{_host()}\n\n"
            f"/** The hooks a plugin may define (one table: GET /api/v1/hooks). */\ninterface Middleware {{\n"
            f"{handlers}\n}}\n\ndeclare var middleware: Middleware;\n/** The current invocation's host object. */\n"
            f"declare var host: Host;\n")

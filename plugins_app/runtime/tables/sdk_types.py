"""TypeScript declarations for plugin authors, generated from the hook table and the host surface."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from plugins_app.runtime.tables.hooks import HOOKS, Field, HookSpec
from plugins_app.runtime.tables.members import OFFERED_BY

_SCALARS = {"id": "string", "string": "string", "number": "number", "integer": "number",
            "boolean": "boolean", "string[]": "string[]", "id[]": "string[]"}


@dataclass(frozen=True)
class HostMember:
    path: str            # under host, e.g. "workspace.read"
    signature: str       # TypeScript, as a property of its parent interface
    doc: str             # what it does, its permission and limits
    given: str = "all"   # which hooks get it: all, session (hooks naming a session), agent, ssh


# The members harness.js's makeHost builds (tests/runtime/test_sdk_types.py checks both agree).
HOST_MEMBERS: tuple[HostMember, ...] = (
    HostMember("log", "log(level: LogLevel, message: string): void",
               "A line in the installation's log (no permission). At most 100 lines per invocation."),
    HostMember("config", "readonly config: Readonly<Record<string, any>>",
               "The installation's settings, plain data checked against its schema (no permission): "
               "cast it to your settings' type."),
    HostMember("fetch", "fetch(url: string, init?: FetchInit): Promise<FetchResponse>",
               "HTTP(S) request (permission host:fetch). Request body up to 1 MiB, answer up to 1 MiB "
               "(HUB_FETCH_MAX_BYTES); private and loopback addresses are refused. {{secret.NAME}} in the "
               "URL's path or query, a header or the body becomes the account's secret NAME as the request "
               "leaves (permission secret:NAME, and only for the secret's allowedHosts)."),
    HostMember("llm", "llm(prompt: string | LlmRequest, options?: LlmOptions): Promise<string>",
               "The platform's model (permission host:llm). Prompt up to 200,000 characters."),
    HostMember("decide", "decide<T extends string>(question: string, options: readonly T[]): Promise<T>",
               "The model picks exactly one of `options` (permission host:decide). At most 50 options of "
               "500 characters."),
    HostMember("agents.list", "list(): Promise<{ agents: Array<{ id: string; name: string }> }>",
               "The agents this plugin owns (permission host:agents)."),
    HostMember("session.id", "readonly id: string", "The session the hook fired for.", "session"),
    HostMember("session.agentId", "readonly agentId: string | null", "Its agent.", "session"),
    HostMember("session.kind", "readonly kind: string | null", "Its sessionKind, where the hook has one.",
               "session"),
    HostMember("session.peer.send",
               "send(targetSessionId: string, text: string): Promise<{ delivered: boolean; text: string }>",
               "A message into another session (permission host:session).", "session"),
    HostMember("session.conversation.read", "read(): Promise<{ messages: unknown[] }>",
               "The session's conversation (permission host:session).", "session"),
    HostMember("workspace.read", "read(path: string): Promise<string | null>",
               "A file of the agent's workspace (permission host:workspace). Paths up to 255 characters.",
               "agent"),
    HostMember("workspace.write", "write(path: string, content: string): Promise<{ path: string; size: number }>",
               "Writes a file (permission host:workspace); 5 MiB per workspace (HUB_WORKSPACE_QUOTA_BYTES).",
               "agent"),
    HostMember("workspace.list",
               "list(prefix?: string): Promise<{ files: Array<{ path: string; size: number; updatedAt: string }> }>",
               "Lists files (permission host:workspace).", "agent"),
    HostMember("workspace.delete", "delete(path: string): Promise<{ deleted: boolean }>",
               "Deletes a file (permission host:workspace).", "agent"),
    HostMember("ssh.command", "command(command: string, options?: { timeoutSeconds?: number }): Promise<SshResult>",
               "Runs a command on the hook's server (permission host:ssh:command). Commands up to 64 KiB, "
               "timeoutSeconds up to 90, 10 calls per invocation.", "ssh"),
)

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

/** A handler's result: the value, or a promise of it. */
type Result<T> = T | Promise<T>;

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


def _host_interface(name: str, members: list[HostMember], extends: str = "") -> list[str]:
    lines = [f"interface {name}{extends} {{"]
    for m in members:
        lines += [f"  /** {m.doc} */", f"  {m.signature};"]
    return lines + ["}"]


def _host() -> str:
    groups: dict[str, list[HostMember]] = {}
    for m in HOST_MEMBERS:
        parent, _, _ = m.path.rpartition(".")
        groups.setdefault(parent, []).append(m)
    blocks = [_host_interface("HostAgents", groups["agents"]),
              _host_interface("HostSessionPeer", groups["session.peer"]),
              _host_interface("HostSessionConversation", groups["session.conversation"]),
              _host_interface("HostSession", groups["session"]),
              _host_interface("HostWorkspace", groups["workspace"]),
              _host_interface("HostSsh", groups["ssh"]),
              _host_interface("Host", groups[""])]
    # Nested objects become properties of their parents.
    blocks[3] = blocks[3].copy()
    blocks[3][-1:] = ["  readonly peer: HostSessionPeer;", "  readonly conversation: HostSessionConversation;", "}"]
    blocks[6] = blocks[6].copy()
    blocks[6][-1:] = [
        "  readonly agents: HostAgents;",
        "  /** Hooks that name a session: " + ", ".join(_hooks_given("session")) + ". */",
        "  readonly session?: HostSession;",
        "  /** Hooks that carry an agent: " + ", ".join(_hooks_given("agent")) + ". */",
        "  readonly workspace?: HostWorkspace;",
        "  /** SSH hooks: " + ", ".join(_hooks_given("ssh")) + ". */",
        "  readonly ssh?: HostSsh;",
        "}",
    ]
    return "\n\n".join("\n".join(b) for b in blocks)


def _hooks_given(kind: str) -> list[str]:
    offer = {"session": "session", "agent": "workspace", "ssh": "ssh"}[kind]   # runtime/tables/members.py's names
    return [s.name for s in HOOKS.values() if OFFERED_BY[offer](s)]


def _pascal(name: str) -> str:
    return name[0].upper() + name[1:]


@lru_cache(maxsize=1)
def middleware_d_ts() -> str:
    """The whole declaration file."""
    contexts = "\n\n".join(_context(spec) for spec in HOOKS.values())
    handlers = "\n".join(
        f"  {spec.name}?: (context: {_pascal(spec.name)}Context, tools: Tools) => Result<{_returns(spec)}>;"
        for spec in HOOKS.values())
    return (f"{_PRELUDE}\n{contexts}\n\n{_host()}\n\n"
            f"/** The hooks a plugin may define (one table: GET /api/v1/hooks). */\ninterface Middleware {{\n"
            f"{handlers}\n}}\n\ndeclare var middleware: Middleware;\n/** The current invocation's host object. */\n"
            f"declare var host: Host;\n")

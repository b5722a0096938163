"""The one table of host.* members: each declared once (permission, TypeScript, how the harness builds it, budget)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from plugins_app.runtime.tables.hooks import HOOKS, HookSpec

# Which invocations a member is offered to, by what the hook carries (the harness builds host.session,
# host.workspace and host.ssh only when the chain's host plan, runtime/web/chain.py's host_plan, has
# that key set).
OFFERED_BY: dict[str, Callable[[HookSpec], bool]] = {
    "always": lambda spec: True,
    "session": lambda spec: spec.session_field is not None,
    "workspace": lambda spec: spec.carries_agent,
    "ssh": lambda spec: spec.ssh,
}
# What the SDK says of an offered group (before the list of hooks that get it).
OFFER_SUMMARY: dict[str, str] = {
    "session": "Hooks that name a session",
    "workspace": "Hooks that carry an agent",
    "ssh": "SSH hooks",
}

# Who answers a member inside the isolate (harness.js's makeHost):
#   bridge  a call into Python (the host bridge checks the grant and runs the @member function);
#   log     the invocation's logger (host.log);
#   config  the installation's settings (host.config);
#   plan    data the host plan carries: host.<offer>.<leaf> is hostPlan[offer][leaf] (host.session.id).
ANSWERED_BY = ("bridge", "log", "config", "plan")
# How a bridged member's stub reads each argument before it crosses to Python (harness.js's ARG_READERS):
#   string          safeString(v): a string, whatever was passed;
#   optionalString  "" when undefined, otherwise safeString(v);
#   optionalJson    null when undefined, otherwise a JSON copy (parse(stringify(v)));
#   jsonList        a JSON copy of v, [] when null or undefined;
#   ...json         every argument from here on, as a JSON copy of the list (host.llm's two call shapes).
ARG_KINDS = ("string", "optionalString", "optionalJson", "jsonList", "...json")
# What the stub makes of the bridge's answer (harness.js's RESULT_WRAPPERS): plain (the value as
# answered), response (fetch's hardened Response-like {status, ok, headers, text(), json()}).
RESULT_KINDS = ("plain", "response")


@dataclass(frozen=True)
class HostMember:
    name: str                   # the dotted path under `host`, as the plugin calls it
    permission: str | None      # the grant an account admin gives; None: free
    signature: str              # TypeScript, as a property of its parent interface in the SDK
    doc: str                    # the SDK's doc comment: what it does, its permission and limits
    args: tuple[str, ...] = ()  # a bridged member's arguments, each an ARG_KINDS entry
    result: str = "plain"       # a RESULT_KINDS entry
    answered: str = "bridge"    # an ANSWERED_BY entry
    offered: str = "always"     # a key of OFFERED_BY
    # Awaiting a charged member counts against the handler's 5 s budget; an uncharged one (a remote
    # command that may run for minutes) does not.
    charged: bool = True
    # True: answering it reaches a system outside the hub (the network, an LLM, the platform, a server).
    # A replay or a shadow run never makes such a call: a stand-in answers it and the run reports it.
    outward: bool = False

    @property
    def top(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def bridged(self) -> bool:
        """Answered by a call into Python; otherwise the harness answers it inside the isolate."""
        return self.answered == "bridge"

    def hooks(self) -> tuple[str, ...]:
        return tuple(name for name, spec in HOOKS.items() if OFFERED_BY[self.offered](spec))


HOST_MEMBERS: tuple[HostMember, ...] = (
    HostMember("log", None, "log(level: LogLevel, message: string): void",
               "A line in the installation's log (no permission). At most 100 lines per invocation.",
               answered="log"),
    HostMember("config", None, "readonly config: Readonly<Record<string, any>>",
               "The installation's settings, plain data checked against its schema (no permission): "
               "cast it to your settings' type.", answered="config"),
    HostMember("fetch", "host:fetch", "fetch(url: string, init?: FetchInit): Promise<FetchResponse>",
               "HTTP(S) request (permission host:fetch). Request body up to 1 MiB, answer up to 1 MiB "
               "(HUB_FETCH_MAX_BYTES); private and loopback addresses are refused. {{secret.NAME}} in the "
               "URL's path or query, a header or the body becomes the account's secret NAME as the request "
               "leaves (permission secret:NAME, and only for the secret's allowedHosts).",
               args=("string", "optionalJson"), result="response", outward=True),
    HostMember("llm", "host:llm", "llm(prompt: string | LlmRequest, options?: LlmOptions): Promise<string>",
               "The platform's model (permission host:llm). Prompt up to 200,000 characters.",
               args=("...json",), outward=True),
    HostMember("decide", "host:decide", "decide<T extends string>(question: string, options: readonly T[]): Promise<T>",
               "The model picks exactly one of `options` (permission host:decide). At most 50 options of "
               "500 characters.", args=("string", "jsonList"), outward=True),
    HostMember("agents.list", "host:agents", "list(): Promise<{ agents: Array<{ id: string; name: string }> }>",
               "The agents this plugin owns (permission host:agents)."),
    HostMember("session.id", "host:session", "readonly id: string", "The session the hook fired for.",
               answered="plan", offered="session"),
    HostMember("session.agentId", "host:session", "readonly agentId: string | null", "Its agent.",
               answered="plan", offered="session"),
    HostMember("session.kind", "host:session", "readonly kind: string | null",
               "Its sessionKind, where the hook has one.", answered="plan", offered="session"),
    HostMember("session.peer.send", "host:session",
               "send(targetSessionId: string, text: string): Promise<{ delivered: boolean; text: string }>",
               "A message into another session (permission host:session).",
               args=("string", "string"), offered="session"),
    HostMember("session.conversation.read", "host:session", "read(): Promise<{ messages: unknown[] }>",
               "The session's conversation (permission host:session).", offered="session", outward=True),
    HostMember("workspace.read", "host:workspace", "read(path: string): Promise<string | null>",
               "A file of the agent's workspace (permission host:workspace). Paths up to 255 characters.",
               args=("string",), offered="workspace"),
    HostMember("workspace.write", "host:workspace",
               "write(path: string, content: string): Promise<{ path: string; size: number }>",
               "Writes a file (permission host:workspace); 5 MiB per workspace (HUB_WORKSPACE_QUOTA_BYTES).",
               args=("string", "string"), offered="workspace"),
    HostMember("workspace.list", "host:workspace",
               "list(prefix?: string): Promise<{ files: Array<{ path: string; size: number; updatedAt: string }> }>",
               "Lists files (permission host:workspace).", args=("optionalString",), offered="workspace"),
    HostMember("workspace.delete", "host:workspace", "delete(path: string): Promise<{ deleted: boolean }>",
               "Deletes a file (permission host:workspace).", args=("string",), offered="workspace"),
    HostMember("kv.get", "host:kv", "get(key: string): Promise<KvValue | null>",
               "The value stored under `key` in this installation's store, or null (permission host:kv). "
               "Keys are 1 to 512 bytes of UTF-8; an expired key reads as null.", args=("...json",)),
    HostMember("kv.put", "host:kv", "put(key: string, value: KvValue, options?: { ttlSeconds?: number }): Promise<void>",
               "Stores a JSON value of up to 64 KiB under `key` (permission host:kv), kept for ttlSeconds "
               "when given; past the account's quota (HUB_KV_MAX_KEYS, HUB_KV_MAX_BYTES) it rejects with "
               "'kv quota exceeded'.", args=("...json",)),
    HostMember("kv.delete", "host:kv", "delete(key: string): Promise<{ deleted: boolean }>",
               "Removes `key` (permission host:kv).", args=("...json",)),
    HostMember("kv.list", "host:kv",
               "list(options?: { prefix?: string; limit?: number; cursor?: string }): Promise<KvPage>",
               "The installation's keys in order, from `cursor`, at most `limit` (1 to 1000, default 100) "
               "(permission host:kv); `cursor` in the answer is null on the last page.", args=("...json",)),
    HostMember("kv.incr", "host:kv",
               "incr(key: string, by?: number, options?: KvIncrOptions): Promise<number | KvRefused>",
               "Adds the integer `by` (default 1) to the counter under `key` in one atomic step, every engine "
               "and machine of the hub counting together, and answers the new value; with `max`, a step that "
               "would pass it changes nothing and answers {ok: false, value} (permission host:kv). "
               "ttlSeconds applies when the counter is created.", args=("...json",)),
    HostMember("ssh.command", "host:ssh:command",
               "command(command: string, options?: { timeoutSeconds?: number }): Promise<SshResult>",
               "Runs a command on the hook's server (permission host:ssh:command). Commands up to 64 KiB, "
               "timeoutSeconds up to 90, 10 calls per invocation.",
               args=("string", "optionalJson"), offered="ssh", charged=False, outward=True),
)

MEMBERS_BY_NAME: dict[str, HostMember] = {m.name: m for m in HOST_MEMBERS}
BRIDGED_MEMBERS: frozenset[str] = frozenset(m.name for m in HOST_MEMBERS if m.bridged)
UNCHARGED_MEMBERS: frozenset[str] = frozenset(m.name for m in HOST_MEMBERS if not m.charged)
OUTWARD_MEMBERS: frozenset[str] = frozenset(m.name for m in HOST_MEMBERS if m.outward)


def _check(m: HostMember) -> None:
    problems = []
    if m.answered not in ANSWERED_BY:
        problems.append(f"answered by {m.answered!r}, not one of {ANSWERED_BY}")
    if m.offered not in OFFERED_BY:
        problems.append(f"unknown offer {m.offered!r}")
    if m.result not in RESULT_KINDS:
        problems.append(f"unknown result kind {m.result!r}")
    if any(kind not in ARG_KINDS for kind in m.args) or "...json" in m.args[:-1]:
        problems.append(f"argument kinds {m.args} (each one of {ARG_KINDS}; '...json' only last)")
    if not m.bridged and (m.args or m.result != "plain" or m.outward or not m.charged):
        problems.append("only a bridged member has arguments, a result kind, outward or uncharged")
    if m.answered == "plan" and (m.offered == "always" or m.name.count(".") != 1):
        problems.append("a plan member is host.<offer>.<leaf> of an offered group")
    if problems:
        raise ValueError(f"host.{m.name}: " + "; ".join(problems))


def _by_top() -> tuple[dict[str, str | None], dict[str, str]]:
    """A plugin's code is granted by the top-level name it reaches (`host.session.id` needs host:session),
    and a top-level group is offered as a whole (the harness leaves out `host.ssh`, not single members)."""
    permissions: dict[str, str | None] = {}
    offers: dict[str, str] = {}
    for m in HOST_MEMBERS:
        _check(m)
        if permissions.setdefault(m.top, m.permission) != m.permission:
            raise ValueError(f"host.{m.top}.* members must share one permission")
        if offers.setdefault(m.top, m.offered) != m.offered:
            raise ValueError(f"host.{m.top}.* members must share one offer")
    if len(MEMBERS_BY_NAME) != len(HOST_MEMBERS):
        raise ValueError("a host member is declared twice")
    for m in HOST_MEMBERS:   # host.agents is an object of members or a member, not both
        if any(other.name.startswith(m.name + ".") for other in HOST_MEMBERS):
            raise ValueError(f"host.{m.name} is both a member and a group of members")
    return permissions, offers


PERMISSION_BY_TOP, OFFER_BY_TOP = _by_top()


def harness_members_json() -> str:
    """What harness.js's makeHost builds the host object from (handed to the isolate by `__hub.init`)."""
    return json.dumps([{"name": m.name, "answered": m.answered, "offered": m.offered, "args": list(m.args),
                        "result": m.result} for m in HOST_MEMBERS])

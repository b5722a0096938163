"""The one table of the 14 middleware hooks: what each receives, may change, and may veto."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Field types a context may carry. "id" is a 64-bit number sent as a string.
ID = "id"
STRING = "string"
NUMBER = "number"
INTEGER = "integer"
BOOLEAN = "boolean"
STRING_LIST = "string[]"
ID_LIST = "id[]"


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    nullable: bool = False
    optional: bool = False
    choices: tuple[str, ...] = ()
    # The least number a handler may return for this field (the harness refuses a smaller one).
    minimum: float | None = None

    def describe(self) -> str:
        text = " | ".join(f'"{c}"' for c in self.choices) if self.choices else self.type
        if self.nullable:
            text += " | null"
        return text


@dataclass(frozen=True)
class HookSpec:
    name: str
    fields: tuple[Field, ...]
    mutable: tuple[str, ...] = ()
    cancellable: bool = True
    carries_agent: bool = False
    # Which context field names the agent and the session the hook fired for.
    agent_field: str | None = None
    session_field: str | None = None
    ssh: bool = False
    summary: str = ""
    field_index: dict[str, Field] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "field_index", {f.name: f for f in self.fields})

    @property
    def observe_only(self) -> bool:
        return not self.mutable

    @property
    def single_field(self) -> str | None:
        return self.mutable[0] if len(self.mutable) == 1 else None

    def mutable_fields(self) -> tuple[Field, ...]:
        return tuple(self.field_index[name] for name in self.mutable)

    def value_of(self, context: dict[str, Any]) -> Any:
        """The hook's mutable value(s) as the API reports them."""
        if self.observe_only:
            return None
        if self.single_field:
            return context[self.single_field]
        return {name: context.get(name) for name in self.mutable}

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "summary": self.summary,
            "fields": [
                {"name": f.name, "type": f.type, "nullable": f.nullable, "optional": f.optional,
                 **({"choices": list(f.choices)} if f.choices else {})}
                for f in self.fields
            ],
            "mutable": list(self.mutable),
            "returns": self.returns(),
            "cancellable": self.cancellable,
            "observeOnly": self.observe_only,
            "carriesAgent": self.carries_agent,
        }

    def returns(self) -> str:
        if self.observe_only:
            base = "void"
        elif self.single_field:
            base = self.field_index[self.single_field].type
        else:
            base = "{ " + "; ".join(f"{m}?: {self.field_index[m].type}" for m in self.mutable) + " }"
        return base + (" | Cancellation" if self.cancellable else "")


def _f(name: str, type_: str = STRING, **kw: Any) -> Field:
    return Field(name, type_, **kw)


SSH_KINDS = ("command", "list_files", "read_file", "write_file", "edit_file", "delete_file")
_SSH_COMMON = (
    _f("sessionId", ID), _f("agentId", ID), _f("sshHostId", ID), _f("hostDisplayName"),
)

HOOKS: dict[str, HookSpec] = {spec.name: spec for spec in (
    HookSpec(
        "systemPrompt",
        (_f("sessionId", ID), _f("agentId", ID), _f("sessionKind"), _f("systemPrompt")),
        mutable=("systemPrompt",), cancellable=False, carries_agent=True,
        agent_field="agentId", session_field="sessionId",
        summary="Rewrite what the agent is told every turn.",
    ),
    HookSpec(
        "userMessageInbound",
        (_f("sessionId", ID), _f("channelId", ID, nullable=True), _f("text"),
         _f("mediaIds", ID_LIST)),
        mutable=("text",), session_field="sessionId",
        summary="Rewrite or veto a person's message before the model sees it.",
    ),
    HookSpec(
        "interAgentMessage",
        (_f("senderSessionId", ID), _f("senderAgentId", ID), _f("targetSessionId", ID),
         _f("isSubagentReport", BOOLEAN), _f("text")),
        mutable=("text",), carries_agent=True,
        agent_field="senderAgentId", session_field="senderSessionId",
        summary="Rewrite or veto a message one agent's conversation sends into another's.",
    ),
    HookSpec(
        "assistantMessageOutbound",
        (_f("sessionId", ID), _f("channelId", ID, nullable=True), _f("text")),
        mutable=("text",), session_field="sessionId",
        summary="The last look before a reply reaches a person.",
    ),
    HookSpec(
        "todoAdded",
        (_f("sessionId", ID), _f("texts", STRING_LIST)),
        mutable=("texts",), session_field="sessionId",
        summary="Rewrite, split, filter or reject the todos an agent writes itself.",
    ),
    HookSpec(
        "notifyScheduled",
        (_f("sessionId", ID), _f("message"), _f("delaySeconds", NUMBER, minimum=0)),
        mutable=("message", "delaySeconds"), session_field="sessionId",
        summary="An agent's timer to itself is being set: clamp, reword or drop it.",
    ),
    HookSpec(
        "notifyDelivered",
        (_f("sessionId", ID), _f("notifyId", ID), _f("message")),
        mutable=("message",), session_field="sessionId",
        summary="An agent's timer fired: reword or drop the wake-up note.",
    ),
    HookSpec(
        "sshConnectionOpening",
        _SSH_COMMON + (
            _f("hostname"), _f("port", INTEGER, nullable=True),
            _f("connectionType", choices=("direct", "tunnel")), _f("username"),
        ),
        carries_agent=True, agent_field="agentId", session_field="sessionId", ssh=True,
        summary="First connection to a server this turn: observe, set up, or refuse.",
    ),
    HookSpec(
        "sshCommandSending",
        _SSH_COMMON + (
            _f("kind", choices=SSH_KINDS), _f("command", nullable=True),
            _f("path", nullable=True), _f("content", nullable=True),
            _f("intent", optional=True),
        ),
        mutable=("command", "path", "content"), carries_agent=True,
        agent_field="agentId", session_field="sessionId", ssh=True,
        summary="A command or file operation is about to run on a server.",
    ),
    HookSpec(
        "sshCommandCompleted",
        _SSH_COMMON + (
            _f("kind", choices=SSH_KINDS), _f("command", nullable=True), _f("path", nullable=True),
            _f("exitCode", INTEGER), _f("output", nullable=True), _f("errorOutput", nullable=True),
            _f("isTruncated", BOOLEAN), _f("durationMs", NUMBER),
        ),
        mutable=("output", "errorOutput"), carries_agent=True,
        agent_field="agentId", session_field="sessionId", ssh=True,
        summary="Rewrite what the model sees of a finished server operation, or withhold it.",
    ),
    HookSpec(
        "sessionClearing",
        (_f("sessionId", ID), _f("agentId", ID), _f("trailingText", nullable=True),
         _f("messageCount", INTEGER), _f("subagentCount", INTEGER), _f("peerThreadCount", INTEGER)),
        cancellable=False, carries_agent=True, agent_field="agentId", session_field="sessionId",
        summary="A session is about to be cleared with /new: last chance to read it.",
    ),
    HookSpec(
        "sessionClearCompleted",
        (_f("sessionId", ID), _f("agentId", ID), _f("deletedMessageCount", INTEGER),
         _f("deletedSubagentCount", INTEGER), _f("deletedPeerThreadCount", INTEGER)),
        cancellable=False, carries_agent=True, agent_field="agentId", session_field="sessionId",
        summary="A session was cleared.",
    ),
    HookSpec(
        "cronJobFiring",
        (_f("cronJobId", ID), _f("agentId", ID), _f("kind", choices=("cron_job", "heartbeat")),
         _f("name"), _f("prompt")),
        mutable=("prompt",), carries_agent=True, agent_field="agentId",
        summary="A scheduled mission is about to start: rewrite its prompt or hold it.",
    ),
    HookSpec(
        "cronJobCompleted",
        (_f("cronJobId", ID), _f("cronJobRunId", ID), _f("sessionId", ID), _f("agentId", ID),
         _f("status")),
        cancellable=False, carries_agent=True, agent_field="agentId", session_field="sessionId",
        summary="A scheduled mission's run closed (at most once).",
    ),
)}

HOOK_NAMES: tuple[str, ...] = tuple(HOOKS)


def get_hook(name: str) -> HookSpec | None:
    return HOOKS.get(name)

"""host.llm and host.decide, through an OpenAI-compatible chat completions endpoint."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

from django.conf import settings

from plugins_app.runtime.web.chain import HostError
from plugins_app.services.execution.host_bridge import HostCall, member
from plugins_app.services.secrets.redaction import Redactor

ROLES = {"system", "user", "assistant"}
# Request fields a plugin may set beside the messages; the operator picks the model.
OPTIONS = {"temperature", "top_p", "max_tokens", "stop", "seed", "response_format"}
MAX_PROMPT_CHARS = 200_000
MAX_OPTIONS = 50
MAX_OPTION_CHARS = 500
MAX_RESPONSE_BYTES = 4 * 1024 * 1024

DECIDE_SYSTEM = ("You choose exactly one option. Reply with that option's text, verbatim, and nothing "
                 "else: no explanation, no quotes, no punctuation.")


def complete(messages: list[dict], options: dict | None = None, *, member_name: str = "llm") -> str:
    """POST {LLM_BASE_URL}/chat/completions; return the assistant's text, with the provider's key
    redacted (as host.fetch redacts a secret): an endpoint echoing it never hands it to a plugin."""
    redactor = key_redactor()
    try:
        return redactor.text(_complete(messages, options, member_name))
    except HostError as exc:
        raise HostError(redactor.text(str(exc))) from None


def key_redactor() -> Redactor:
    """A redactor knowing the LLM provider's key."""
    redactor = Redactor()
    if settings.HUB_HOST.llm_api_key:
        redactor.add("LLM_API_KEY", settings.HUB_HOST.llm_api_key)
    return redactor


def chat_request(messages: list[dict], options: dict | None, member_name: str) -> tuple[str, bytes, dict[str, str]]:
    """The URL, body and headers of a chat completion request to the operator's endpoint."""
    if not settings.HUB_HOST.llm_base_url or not settings.HUB_HOST.llm_model:
        raise HostError(f"host.{member_name} is not available: no LLM endpoint is configured on this hub "
                        "(LLM_BASE_URL and LLM_MODEL)")
    body = json.dumps({**(options or {}), "model": settings.HUB_HOST.llm_model, "messages": messages}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if settings.HUB_HOST.llm_api_key:
        headers["Authorization"] = f"Bearer {settings.HUB_HOST.llm_api_key}"
    return settings.HUB_HOST.llm_base_url.rstrip("/") + "/chat/completions", body, headers


def time_limit() -> float:
    return min(settings.HUB_HOST.llm_timeout_seconds, 5.0)


def answered_with(status: int, detail: str, member_name: str) -> HostError:
    """The error for an endpoint that answered with an HTTP error status."""
    return HostError(f"host.{member_name}: the LLM endpoint answered HTTP {status}: {detail}")


def unreachable(exc: Exception, member_name: str) -> HostError:
    return HostError(f"host.{member_name}: the LLM endpoint is unreachable: {exc}")


def chat_content(raw: bytes, member_name: str) -> str:
    """The assistant's text in a chat completion's raw answer."""
    try:
        answer = json.loads(raw)
        content = answer["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise HostError(f"host.{member_name}: the LLM endpoint's answer is not a chat completion") from None
    if not isinstance(content, str):
        raise HostError(f"host.{member_name}: the LLM answered without text")
    return content


def error_detail(raw: bytes, reason: str) -> str:
    """What an endpoint's error answer says: its JSON error's message, else the status's reason."""
    try:
        data = json.loads(raw)
        error = data.get("error")
        return str(error.get("message") if isinstance(error, dict) else error)[:300]
    except (ValueError, AttributeError):
        return reason or "error"


def _complete(messages: list[dict], options: dict | None, member_name: str) -> str:
    url, body, headers = chat_request(messages, options, member_name)
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=time_limit()) as response:
            raw = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise answered_with(exc.code, _error_text(exc), member_name) from None
    except (OSError, ValueError) as exc:
        raise unreachable(exc, member_name) from None
    return chat_content(raw, member_name)


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read(64 * 1024)
    except OSError:
        return exc.reason or "error"
    return error_detail(raw, exc.reason)


def _checked_options(raw) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise HostError("host.llm: options must be an object")
    unknown = sorted(set(raw) - OPTIONS - {"messages", "system"})
    if unknown:
        raise HostError(f"host.llm: unknown option {unknown[0]!r}; allowed: {', '.join(sorted(OPTIONS))}")
    return {k: v for k, v in raw.items() if k in OPTIONS}


def _checked_messages(raw) -> list[dict]:
    if not isinstance(raw, list) or not raw:
        raise HostError("host.llm: messages must be a non-empty array of {role, content}")
    messages, total = [], 0
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise HostError(f"host.llm: messages[{i}] must be {{role: system|user|assistant, content: string}}")
        total += len(m["content"])
        messages.append({"role": m["role"], "content": m["content"]})
    if total > MAX_PROMPT_CHARS:
        raise HostError(f"host.llm: the prompt is over {MAX_PROMPT_CHARS} characters")
    return messages


def parse_llm_args(args: list) -> tuple[list[dict], dict]:
    """llm(prompt, options?) or llm({messages, ...options}); `system` prepends a system message."""
    if not args:
        raise HostError("host.llm: give a prompt string or {messages: [...]}")
    first = args[0]
    if isinstance(first, str):
        options = args[1] if len(args) > 1 else None
        messages = _checked_messages([{"role": "user", "content": first}])
    elif isinstance(first, dict):
        options = first
        messages = _checked_messages(first.get("messages"))
    else:
        raise HostError("host.llm: give a prompt string or {messages: [...]}")
    checked = _checked_options(options)
    system = options.get("system") if isinstance(options, dict) else None
    if system is not None:
        if not isinstance(system, str):
            raise HostError("host.llm: system must be a string")
        messages.insert(0, {"role": "system", "content": system})
    return messages, checked


def match_option(answer: str, options: list[str]) -> str | None:
    """The one option the model's answer names (case-insensitive), or None."""
    cleaned = answer.strip().strip("\"'`*").strip().rstrip(".!").strip().lower()
    for option in options:
        if option.strip().lower() == cleaned:
            return option
    named = [o for o in options
             if re.search(r"(?<!\w)" + re.escape(o.strip().lower()) + r"(?!\w)", answer.lower())]
    # Drop options only named as part of a longer one ("no" inside "no way").
    named = [o for o in named if not any(o != other and o.lower() in other.lower() for other in named)]
    return named[0] if len(named) == 1 else None


@member("llm", stand_in="")   # a replay or shadow run asks no model: an empty answer
def llm(call: HostCall, args: list) -> str:
    messages, options = parse_llm_args(args)
    return complete(messages, options)


def decide_prompt(args: list) -> tuple[list[dict], list[str]]:
    """host.decide(question, options): the chat messages that ask it, and the options."""
    question = args[0] if args else None
    options = args[1] if len(args) > 1 else None
    if not isinstance(question, str) or not question.strip():
        raise HostError("host.decide: the question must be a non-empty string")
    if (not isinstance(options, list) or not options or len(options) > MAX_OPTIONS
            or not all(isinstance(o, str) and o.strip() and len(o) <= MAX_OPTION_CHARS for o in options)):
        raise HostError(f"host.decide: options must be 1 to {MAX_OPTIONS} non-empty strings "
                        f"of at most {MAX_OPTION_CHARS} characters")
    if len({o.strip().lower() for o in options}) != len(options):
        raise HostError("host.decide: options must differ (ignoring case)")
    if len(question) > MAX_PROMPT_CHARS:
        raise HostError(f"host.decide: the question is over {MAX_PROMPT_CHARS} characters")
    listing = "\n".join(f"- {o}" for o in options)
    return [{"role": "system", "content": DECIDE_SYSTEM},
            {"role": "user", "content": f"{question}\n\nOptions:\n{listing}\n\nAnswer with one option."}], options


DECIDE_OPTIONS = {"temperature": 0}


def decided(answer: str, options: list[str]) -> str:
    """The option the model's answer names; HostError when it names none (or several)."""
    choice = match_option(answer, options)
    if choice is None:
        raise HostError(f"host.decide: the model's answer matches none of the options: {answer.strip()[:200]!r}")
    return choice


@member("decide", stand_in=None)   # a replay or shadow run asks no model: no decision
def decide(call: HostCall, args: list) -> str:
    messages, options = decide_prompt(args)
    return decided(complete(messages, dict(DECIDE_OPTIONS), member_name="decide"), options)

"""Whether a stored matcher holds for a context, and which condition failed when it does not.

A matcher is an object whose keys all hold: a context field's condition, `any` (one of several
matchers), `all`, `not`. A field's condition is an object whose keys all hold: `equals`, `in`,
`includes` and `startsWith` (a text, or any of several), `regex` (RE2), `ignoreCase` (for the rest of
the object and what it nests), and `any`/`all`/`not` of conditions. On a list field (todos' `texts`,
`mediaIds`) an operator holds when an element satisfies it. A null or absent field satisfies only
`equals: null` or an `in` holding null. Ids are strings, and compared as strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

from plugins_app.runtime.matching import words

# RE2 keeps its compiled programs within this memory (its default is 8 MiB); a pattern that needs
# more is refused at install rather than at a call.
RE2_MAX_MEM = 4 << 20


@dataclass(frozen=True)
class Verdict:
    matched: bool
    failed: str | None = None   # the condition that failed, in words (None when it matched)


MATCHED = Verdict(True)


def _options(ignore_case: bool) -> Any:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.max_mem = RE2_MAX_MEM
    options.log_errors = False   # a refused pattern is the author's to hear of, not the log's
    return options


def pattern_error(pattern: str, ignore_case: bool = False) -> str | None:
    """What RE2 says is wrong with `pattern`, or None."""
    try:
        re2.compile(pattern, options=_options(ignore_case))
    except re2.error as exc:
        message = exc.args[0] if exc.args else exc
        return message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
    return None


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str, ignore_case: bool) -> Any:
    """RE2's program for a pattern the install checked, compiled once per process."""
    return re2.compile(pattern, options=_options(ignore_case))


def holds(matcher: dict[str, Any] | None, context: dict[str, Any]) -> bool:
    """Does `matcher` hold for `context`? The seam's question, on every call: no words are made."""
    return not matcher or _holds(matcher, context)


def _holds(matcher: dict[str, Any], context: dict[str, Any]) -> bool:
    for key, value in matcher.items():
        if key == "all":
            ok = all(_holds(sub, context) for sub in value)
        elif key == "any":
            ok = any(_holds(sub, context) for sub in value)
        elif key == "not":
            ok = not _holds(value, context)
        else:
            ok = _condition(key, value, context.get(key), False)
        if not ok:
            return False
    return True


def check(matcher: dict[str, Any] | None, context: dict[str, Any]) -> Verdict:
    """Does `matcher` (stored, so already checked) hold for `context` (checked against its hook), and if
    not, which condition failed, in words (for explain and `hub dev`)?"""
    if not matcher:
        return MATCHED
    failed = _matcher(matcher, context)
    return MATCHED if failed is None else Verdict(False, failed)


def _matcher(matcher: dict[str, Any], context: dict[str, Any]) -> str | None:
    """None when every key holds; otherwise the first one that does not, in words."""
    for key, value in matcher.items():
        if key == "all":
            for sub in value:
                failed = _matcher(sub, context)
                if failed is not None:
                    return failed
        elif key == "any":
            if all(_matcher(sub, context) is not None for sub in value):
                return "none of: " + "; ".join(words.matcher(sub) for sub in value)
        elif key == "not":
            if _matcher(value, context) is None:
                return "not expected, but " + words.matcher(value)
        elif not _condition(key, value, context.get(key), False):
            return f"wanted {words.condition(key, value)}; {key} is {words.shown(context.get(key))}"
    return None


def _condition(name: str, condition: dict[str, Any], value: Any, ignore_case: bool) -> bool:
    ignore_case = condition.get("ignoreCase", ignore_case)
    for op, operand in condition.items():
        if op == "ignoreCase":
            continue
        if op == "all":
            ok = all(_condition(name, c, value, ignore_case) for c in operand)
        elif op == "any":
            ok = any(_condition(name, c, value, ignore_case) for c in operand)
        elif op == "not":
            ok = not _condition(name, operand, value, ignore_case)
        elif isinstance(value, list):   # a list field: some element satisfies the operator
            ok = any(_operator(op, operand, item, ignore_case) for item in value)
        else:
            ok = _operator(op, operand, value, ignore_case)
        if not ok:
            return False
    return True


def _operator(op: str, operand: Any, value: Any, ignore_case: bool) -> bool:
    if op == "equals":
        return _same(operand, value, ignore_case)
    if op == "in":
        return any(_same(choice, value, ignore_case) for choice in operand)
    if not isinstance(value, str):   # null or absent text matches no text operator
        return False
    if op == "regex":
        return compile_pattern(operand, ignore_case).search(_utf8_safe(value)) is not None
    texts = operand if isinstance(operand, list) else [operand]
    subject = value.casefold() if ignore_case else value
    wanted = [t.casefold() if ignore_case else t for t in texts]
    if op == "includes":
        return any(t in subject for t in wanted)
    return any(subject.startswith(t) for t in wanted)   # startsWith


def _same(expected: Any, value: Any, ignore_case: bool) -> bool:
    if isinstance(expected, bool) or isinstance(value, bool):   # True is not 1 here
        return expected is value
    if ignore_case and isinstance(expected, str) and isinstance(value, str):
        return expected.casefold() == value.casefold()
    return bool(expected == value)


def _utf8_safe(text: str) -> str:
    # RE2 reads UTF-8: a lone surrogate (which JSON can carry) cannot be encoded, so it is read as U+FFFD.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text

"""Errors plugin authors meet because plugins run in strict mode under SES, each with what to do instead."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hint:
    """An error message that names a construct the runtime cannot run, and the way round it."""

    match: str      # text the engine's message contains
    construct: str  # what the author wrote (or a library built), in words
    advice: str


HINTS: tuple[Hint, ...] = (
    Hint("Strict mode code may not include a with statement",
         "a `with` statement (sloppy-mode JavaScript)",
         "plugins run in strict mode, which has no `with`. A library may build one at run time: lodash's "
         "_.template does unless given a variable name, e.g. _.template(text, { variable: 'data' }) "
         "with data.name in the template instead of name"),
)


def explain(message: str) -> str:
    """`message`, with what was refused and what to do instead when it is a known strict-mode refusal."""
    for hint in HINTS:
        if hint.match in message and hint.advice not in message:
            return f"{message}: {hint.construct} cannot run here; {hint.advice}"
    return message

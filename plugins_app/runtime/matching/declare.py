"""A plugin's matcher declaration checked against the hook table, into the plain data stored with its version."""

from __future__ import annotations

from typing import Any

from plugins_app.runtime.matching.evaluate import compile_pattern, pattern_error
from plugins_app.runtime.tables.hooks import BOOLEAN, ID, ID_LIST, INTEGER, NUMBER, STRING, STRING_LIST, Field, HookSpec

Matcher = dict[str, Any]   # {field: condition, any: [...], all: [...], not: {...}}; see evaluate.py

# Bounds that keep one check cheap whatever a plugin declares: a matcher is evaluated on every call.
MAX_DEPTH = 8            # nested any/all/not
MAX_CONDITIONS = 256     # every object in one hook's matcher
MAX_VALUES = 100         # values in one `in`, `includes` or `startsWith`
MAX_VALUE_CHARS = 1000   # one string compared with
MAX_PATTERN_CHARS = 1000

LOGICAL = ("any", "all", "not")
STRING_OPS = ("equals", "in", "includes", "startsWith", "regex")
FIELD_KEYS = (*STRING_OPS, "ignoreCase", *LOGICAL)
STRING_TYPES = (STRING, ID, STRING_LIST, ID_LIST)


class MatcherError(ValueError):
    """A declaration the hub refuses, with the path of the part that is wrong."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


class _Budget:
    def __init__(self) -> None:
        self.left = MAX_CONDITIONS

    def spend(self, path: str) -> None:
        self.left -= 1
        if self.left < 0:
            raise MatcherError(path, f"a hook's matcher has at most {MAX_CONDITIONS} conditions")


def declare(declared: Any, hooks: list[str], specs: dict[str, HookSpec], root: str = "middleware.match") -> dict[str, Matcher]:
    """`declared` (what the plugin assigned to middleware.match, as JSON) checked for the hooks the plugin
    defines: {hook: matcher}, or MatcherError naming the path. None (no declaration) is {}."""
    if declared is None:
        return {}
    if not isinstance(declared, dict):
        raise MatcherError(root, "expected an object of hook names to matchers")
    clean: dict[str, Matcher] = {}
    for hook, matcher in declared.items():
        path = f"{root}.{hook}"
        spec = specs.get(hook)
        if spec is None:
            raise MatcherError(path, f"{hook!r} is not a hook")
        if hook not in hooks:
            raise MatcherError(path, f"the plugin has no {hook} handler for this matcher to narrow")
        clean[hook] = _matcher(spec, matcher, path, 0, _Budget())
    return clean


def _matcher(spec: HookSpec, matcher: Any, path: str, depth: int, budget: _Budget) -> Matcher:
    budget.spend(path)
    if depth > MAX_DEPTH:
        raise MatcherError(path, f"matchers nest at most {MAX_DEPTH} deep")
    if not isinstance(matcher, dict) or not matcher:
        raise MatcherError(path, "expected an object of conditions on the context's fields (or any/all/not)")
    clean: Matcher = {}
    for key, value in matcher.items():
        sub = f"{path}.{key}"
        if key in ("any", "all"):
            clean[key] = [_matcher(spec, m, f"{sub}[{i}]", depth + 1, budget) for i, m in enumerate(_list(value, sub))]
        elif key == "not":
            clean[key] = _matcher(spec, value, sub, depth + 1, budget)
        elif key in spec.field_index:
            clean[key] = _condition(spec.field_index[key], value, sub, depth + 1, budget)
        else:
            fields = ", ".join(spec.field_index)
            raise MatcherError(sub, f"not a field of {spec.name} (its fields: {fields}; or any, all, not)")
    return clean


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise MatcherError(path, "expected a non-empty array")
    if len(value) > MAX_VALUES:
        raise MatcherError(path, f"at most {MAX_VALUES} entries")
    return value


def _condition(f: Field, condition: Any, path: str, depth: int, budget: _Budget) -> Matcher:
    budget.spend(path)
    if depth > MAX_DEPTH:
        raise MatcherError(path, f"matchers nest at most {MAX_DEPTH} deep")
    if not isinstance(condition, dict) or not condition:
        raise MatcherError(path, f"expected an object of operators ({', '.join(FIELD_KEYS)})")
    ignore_case = condition.get("ignoreCase", False)
    if not isinstance(ignore_case, bool):
        raise MatcherError(f"{path}.ignoreCase", "expected true or false")
    clean: Matcher = {}
    for key, value in condition.items():
        sub = f"{path}.{key}"
        if key == "ignoreCase":
            clean[key] = value
        elif key in ("any", "all"):
            clean[key] = [_condition(f, c, f"{sub}[{i}]", depth + 1, budget) for i, c in enumerate(_list(value, sub))]
        elif key == "not":
            clean[key] = _condition(f, value, sub, depth + 1, budget)
        elif key in STRING_OPS:
            clean[key] = _operand(f, key, value, sub, ignore_case)
        else:
            raise MatcherError(sub, f"not an operator (the operators: {', '.join(FIELD_KEYS)})")
    return clean


def _operand(f: Field, op: str, value: Any, path: str, ignore_case: bool) -> Any:
    if op == "equals":
        return _value(f, value, path)
    if op == "in":
        return [_value(f, v, f"{path}[{i}]") for i, v in enumerate(_list(value, path))]
    if f.type not in STRING_TYPES:
        raise MatcherError(path, f"{op} compares text; {f.name} is {f.describe()} (use equals or in)")
    if op == "regex":
        return _pattern(value, path, ignore_case)
    texts = value if isinstance(value, list) else [value]   # includes / startsWith: one text or any of several
    for i, text in enumerate(_list(texts, path)):
        _text(text, f"{path}[{i}]" if isinstance(value, list) else path)
    return value


def _value(f: Field, value: Any, path: str) -> Any:
    """One value an equals or in compares the field (or, for a list field, each element) with."""
    if value is None:
        if f.nullable or f.optional:
            return None
        raise MatcherError(path, f"{f.name} is never null ({f.describe()})")
    kind = {STRING_LIST: STRING, ID_LIST: ID}.get(f.type, f.type)
    if kind == ID:
        if not isinstance(value, str):
            raise MatcherError(path, "ids are compared as strings: write \"7\", not 7")
        return _text(value, path)
    if kind == STRING:
        _text(value, path)
        if f.choices and value not in f.choices:
            raise MatcherError(path, f"{f.name} is one of {', '.join(f.choices)}; {value!r} never matches")
        return value
    if kind == BOOLEAN:
        if not isinstance(value, bool):
            raise MatcherError(path, "expected true or false")
        return value
    if kind in (NUMBER, INTEGER):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise MatcherError(path, f"expected a number ({f.name} is {f.type})")
        return value
    raise MatcherError(path, f"{f.name} ({f.type}) cannot be matched")


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise MatcherError(path, "expected a string")
    if len(value) > MAX_VALUE_CHARS:
        raise MatcherError(path, f"at most {MAX_VALUE_CHARS} characters")
    return value


def _pattern(value: Any, path: str, ignore_case: bool) -> str:
    if not isinstance(value, str) or not value:
        raise MatcherError(path, "expected a regular expression as a non-empty string")
    if len(value) > MAX_PATTERN_CHARS:
        raise MatcherError(path, f"a pattern has at most {MAX_PATTERN_CHARS} characters")
    problem = pattern_error(value, ignore_case)
    if problem is not None:
        raise MatcherError(path, f"not a pattern RE2 accepts ({problem}); backreferences and lookaround are "
                                 "not supported, as matching stays linear in the input")
    compile_pattern(value, ignore_case)
    return value

"""Starter sources per hook for the code editor, and what it completes, written from the hook table and
the SDK's declarations (GET /api/v1/sdk/middleware.d.ts)."""

from __future__ import annotations

from functools import cache

from plugins_app.runtime.tables.hooks import HOOK_NAMES, HOOKS
from plugins_app.runtime.tables.members import HOST_MEMBERS
from plugins_app.runtime.tables.sdk_types import context_type_name, web_global_members, web_globals

TS_TYPES = {"id": "string", "string": "string", "number": "number", "integer": "number", "boolean": "boolean",
            "string[]": "string[]", "id[]": "string[]"}


def _ts_type(field) -> str:
    text = " | ".join(f'"{c}"' for c in field.choices) if field.choices else TS_TYPES[field.type]
    return text + (" | null" if field.nullable else "")


def _body(spec) -> list[str]:
    lines = []
    if spec.cancellable:
        lines.append('  // return tools.cancel("why"); vetoes it: the chain stops and the cancel log records the reason.')
    if spec.observe_only:
        lines += [f'  host.log("info", `{spec.name} in ${{c.{spec.fields[0].name}}}`);',
                  "  // The return value is ignored: this hook only observes."]
    elif spec.single_field:
        lines.append(f"  return c.{spec.single_field};   // the new value; return it unchanged to pass")
    else:
        fields = ", ".join(f"{name}: c.{name}" for name in spec.mutable)
        lines.append(f"  return {{ {fields} }};   // any of these fields; the others pass unchanged")
    return lines


def starter(hook: str, typescript: bool) -> str:
    """A handler typed with the SDK's own names (`TodoAddedContext`, `Tools`), which the type check and a
    local tsc with middleware.d.ts resolve; JavaScript gets the same in a JSDoc comment."""
    spec = HOOKS[hook]
    context = "; ".join(f"{f.name}{'?' if f.optional else ''}: {_ts_type(f)}" for f in spec.fields)
    head = [f"// {spec.summary}", f"// Handlers return {spec.returns()}.", f"// c: {{ {context} }}"]
    if typescript:
        lines = [f"globalThis.middleware.{hook} = async (c: {context_type_name(spec)}, tools: Tools) => {{"]
    else:
        lines = [f"/** @param {{{context_type_name(spec)}}} c @param {{Tools}} tools */",
                 f"globalThis.middleware.{hook} = async (c, tools) => {{"]
    return "\n".join(head + lines + [*_body(spec), "};", ""])


def starters() -> dict:
    return {hook: {"typescript": starter(hook, True), "javascript": starter(hook, False)} for hook in HOOK_NAMES}


@cache
def completions() -> dict:
    """What the editor completes, from the same tables as GET /api/v1/sdk/middleware.d.ts: hook names
    after `middleware.`, the hook's context fields after its context parameter, `tools.cancel` in
    cancellable hooks, host members after `host.` (with their signatures), and the web globals."""
    return {
        "hooks": [{"label": name, "detail": spec.returns(), "info": spec.summary} for name, spec in HOOKS.items()]
        + [{"label": "match", "detail": "{ <hook>: { <field>: { regex, includes, startsWith, equals, in, not, any, all } } }",
            "info": "When each handler wants to run: checked before it is started (docs/plugins-authoring.md)."}],
        "fields": {name: [{"label": f.name, "detail": _ts_type(f)} for f in spec.fields] for name, spec in HOOKS.items()},
        "cancellable": [name for name, spec in HOOKS.items() if spec.cancellable],
        "tools": [{"label": "cancel", "detail": "cancel(reason?: string): CancelToken",
                   "info": "Veto this hook: return the token. The reason is cut to 500 characters."}],
        "host": [{"path": m.name, "detail": m.signature, "info": m.doc} for m in HOST_MEMBERS],
        "globals": web_globals(),
        "members": web_global_members(),
    }


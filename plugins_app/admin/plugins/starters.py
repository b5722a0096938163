"""Starter sources per hook for the install page's editor, written from the hook table."""

from __future__ import annotations

from plugins_app.runtime.tables.hooks import HOOK_NAMES, HOOKS

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
    spec = HOOKS[hook]
    context = "; ".join(f"{f.name}{'?' if f.optional else ''}: {_ts_type(f)}" for f in spec.fields)
    head = [f"// {spec.summary}", f"// Handlers return {spec.returns()}."]
    signature = (f"async (c: {{ {context} }}, tools: any) => {{" if typescript
                 else f"async (c, tools) => {{   // c: {{ {context} }}")
    return "\n".join(head + [f"globalThis.middleware.{hook} = {signature}", *_body(spec), "};", ""])


def starters() -> dict:
    return {hook: {"typescript": starter(hook, True), "javascript": starter(hook, False)} for hook in HOOK_NAMES}


def completions() -> dict:
    """What the editor completes, from the same tables as GET /api/v1/sdk/middleware.d.ts: hook names
    after `middleware.`, the hook's context fields after `c.`, host members after `host.`."""
    from plugins_app.runtime.tables.sdk_types import HOST_MEMBERS

    return {
        "hooks": [{"label": name, "detail": spec.returns(), "info": spec.summary} for name, spec in HOOKS.items()],
        "fields": {name: [{"label": f.name, "detail": _ts_type(f)} for f in spec.fields] for name, spec in HOOKS.items()},
        "host": [{"path": m.path, "detail": m.signature, "info": m.doc} for m in HOST_MEMBERS],
    }

"""The editor's starter templates: one per hook and language, each compiling to exactly its hook, the
TypeScript ones typed with the SDK's names and type-checking against it; and the completion table."""

import pytest

from plugins_app.admin.plugins.starters import starters
from plugins_app.runtime.tables.hooks import HOOK_NAMES, HOOKS
from plugins_app.services.plugins import installations as plugins


@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_each_starter_compiles_to_its_hook(hook):
    for language, source in starters()[hook].items():
        compiled = plugins.compile_source(source, language)
        assert compiled["hooks"] == [hook], (language, compiled)
        assert HOOKS[hook].summary in source


@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_each_typescript_starter_type_checks_with_the_sdks_types(hook):
    source = starters()[hook]["typescript"]
    assert f"(c: {hook[0].upper() + hook[1:]}Context, tools: Tools)" in source and ": any" not in source
    assert plugins.compile_source(source, "typescript", typecheck=True)["hooks"] == [hook]


def test_the_completion_table_covers_tools_host_and_web_globals():
    from plugins_app.admin.plugins.starters import completions
    from plugins_app.runtime.tables.members import HOST_MEMBERS
    from plugins_app.runtime.tables.sdk_types import middleware_d_ts

    table = completions()
    assert [t["label"] for t in table["tools"]] == ["cancel"]
    assert f"  {table['tools'][0]['detail']};" in middleware_d_ts()   # the SDK's own signature
    assert set(table["cancellable"]) == {name for name, spec in HOOKS.items() if spec.cancellable}
    assert {h["path"] for h in table["host"]} == {m.name for m in HOST_MEMBERS} and "config" in {
        h["path"] for h in table["host"]}
    globals_ = {g["label"]: g["detail"] for g in table["globals"]}
    assert {"setTimeout", "crypto", "URL", "TextEncoder", "structuredClone", "console"} <= set(globals_)
    assert globals_["atob"] == "atob(data: string): string"
    assert {m["label"] for m in table["members"]["crypto"]} == {"getRandomValues", "randomUUID", "subtle"}
    assert {m["label"] for m in table["members"]["console"]} == {"log", "info", "debug", "warn", "error"}

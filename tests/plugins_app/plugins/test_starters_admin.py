"""The install page's starter templates: one per hook and language, each compiling to exactly its hook."""

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

"""Fixtures for plugins_app tests: installing plugins, executing hooks, the spec's examples."""

import pytest

from plugins_app.services import plugins
from tests.spec_examples import EXAMPLES, example  # noqa: F401  (re-exported for the test modules)

PROMPT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "base"}


@pytest.fixture
def install(account):
    def do(source, name=None, language="javascript", target=None, **kw):
        do.count += 1
        return plugins.install_plugin(target or account, name=name or f"plugin {do.count}", source=source,
                                      language=language, **kw)
    do.count = 0
    return do


def appender(suffix: str) -> str:
    return f"globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + {suffix!r};"

"""Shared values for plugins_app tests: a prompt context and a plugin that appends to the prompt."""

PROMPT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "base"}


def appender(suffix: str) -> str:
    return f"globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + {suffix!r};"

"""Fixtures for runtime tests: a real engine tier (supervised engine processes), no database."""

import itertools

import pytest

from plugins_app.runtime.engine.supervisor import Supervisor, local_supervisor
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import Handler, run_chain
from plugins_app.runtime.web.tier import tier_for

_ids = itertools.count(1)


@pytest.fixture(scope="session")
def supervisor():
    supervisor = local_supervisor(engines=2, lane=1)
    yield supervisor
    supervisor.stop()


@pytest.fixture(scope="session")
def pool(supervisor):
    tier = tier_for(supervisor.describe())
    yield tier
    tier.shutdown()


@pytest.fixture
def make_handler(pool):
    def make(source, language="javascript", slug=None, config=None):
        compiled = pool.compile(source, language)
        assert not compiled["errors"], compiled["errors"]
        n = next(_ids)
        return Handler(str(n), slug or f"plugin-{n}", f"hash-{n}", compiled["code"], config or {})
    return make


@pytest.fixture
def chain(pool):
    accounts = itertools.count(1)

    def run(hook, handlers, context, account=None, **kw):
        return run_chain(pool, account or f"acct-{next(accounts)}", HOOKS[hook], handlers, context, **kw)
    return run


PROMPT_CONTEXT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "base"}
INBOUND_CONTEXT = {"sessionId": "1", "channelId": None, "text": "hello", "mediaIds": []}


def _supervised(tmp_path, lane: int):
    supervisor = Supervisor(tmp_path / "engines", engines=1, lane=lane).start()
    tier = tier_for(supervisor.describe())
    yield supervisor, tier
    tier.shutdown()
    supervisor.stop()


@pytest.fixture
def one_engine(tmp_path):
    """A supervisor with one engine (no lane) and its tier."""
    yield from _supervised(tmp_path, lane=0)


@pytest.fixture
def engine_and_lane(tmp_path):
    """A supervisor with one shared engine and one lane engine, and its tier."""
    yield from _supervised(tmp_path, lane=1)

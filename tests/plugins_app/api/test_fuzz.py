"""Schemathesis against the served OpenAPI schema: every operation, an account key, no 500, every status
code documented, every response matching its schema; then the stateful phase follows the schema's links
(create a plugin, an agent, a cron job, then act on it)."""

import subprocess
import sys
from pathlib import Path

import pytest

from accounts.models import Account, ApiKey
from middleware_hub.celery import app
from plugins_app.models import CancelLog
from plugins_app.services.host import agents
from plugins_app.services.plugins import installations as plugins

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ST = Path(sys.executable).with_name("st")
CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance"
# The stateful phase's scenarios are short: each follows a link or two from what it created.
CONFIG = """
[phases.stateful]
max-steps = 6
"""
PASS = "globalThis.middleware.userMessageInbound = async (c) => c.text;"


@pytest.fixture
def unconsumed_broker():
    """Tasks the fuzzed requests enqueue (a cron run, a timer) go to memory, never to var/broker."""
    saved = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = "memory://", False
    app._pool = app.amqp._producer_pool = None
    yield
    app.conf.broker_url, app.conf.task_always_eager = saved
    app._pool = app.amqp._producer_pool = None


def seeded_account() -> Account:
    """An account whose lists are not empty, with the rows schema drift hides in: a change and a
    cancellation of a plugin since uninstalled (their installationId is null), an agent, a live plugin.
    Its plugins never run anything slow."""
    account = Account.objects.create(name="fuzzed")
    gone = plugins.install_plugin(account, name="gone", source=PASS, language="javascript")
    CancelLog.objects.create(account=account, installation=gone, hook="userMessageInbound", plugin_slug="gone",
                             reason="no", context={"sessionId": "1", "channelId": None, "text": "x", "mediaIds": []})
    plugins.uninstall(account, gone.pk)
    plugins.install_plugin(account, name="kept", source=PASS, language="javascript")
    agents.register_agent(account, "7", {"name": "Ada"})
    return account


def test_schemathesis_finds_nothing(live_server, unconsumed_broker, tmp_path):
    _, key = ApiKey.issue(seeded_account(), name="fuzz")
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    command = [
        str(ST), "--config-file", str(tmp_path / "schemathesis.toml"),
        "run", f"{live_server.url}/api/schema/", "--url", live_server.url,
        "-H", f"Authorization: Bearer {key}",
        "--phases", "examples,coverage,fuzzing,stateful", "--checks", CHECKS,
        "--max-examples", "12", "--seed", "1", "--workers", "1",
        "--generation-database", "none", "--request-timeout", "30", "--no-color",
        "--report-dir", str(tmp_path),
        # The live tail streams until its connection limit (minutes): tests/hub_cli/test_tail.py drives it.
        "--exclude-path", "/api/v1/tail",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-5000:]
    assert "Stateful" in done.stdout and "links" not in done.stderr.lower()

"""A try-run (record=False) leaves no audit rows or metering: its peer message is stood in (nothing
is sent, so no nested chain runs), while a live run's goes through the peer's chain and is recorded."""

import pytest

from plugins_app.models import CancelLog, UsageDaily
from plugins_app.services.execution.execute import execute_hook

from ..conftest import PROMPT

pytestmark = pytest.mark.django_db

SENDER = """globalThis.middleware.systemPrompt = async (c) => {
  await host.session.peer.send("99", "hello peer");
  return c.systemPrompt;
};"""
VETO = "globalThis.middleware.interAgentMessage = async (c, t) => t.cancel('no peers');"


@pytest.mark.parametrize("record, sent, rows", [(False, [], 0), (True, [True], 1)])
def test_nested_chains_follow_the_record_flag(install, account, record, sent, rows):
    install(SENDER, name="sender", grant=["host:session"])
    install(VETO, name="veto")
    result, effects = execute_hook(account, "systemPrompt", PROMPT, record=record)
    assert [e["cancelled"] for e in effects if e["type"] == "peerMessage"] == sent
    assert CancelLog.objects.filter(account=account, hook="interAgentMessage").count() == rows
    assert UsageDaily.objects.filter(account=account).exists() is bool(rows)

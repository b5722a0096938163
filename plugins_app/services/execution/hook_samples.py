"""Realistic example contexts for each of the 14 hooks: the try-it page's defaults and the API docs' examples."""

from __future__ import annotations

from typing import Any

from plugins_app.runtime.tables.context import sample_context
from plugins_app.runtime.tables.hooks import HOOKS

SESSION, AGENT, HOST = "7301240581932107776", "7301240581932107521", "7301240581932107900"

EXAMPLES: dict[str, dict[str, Any]] = {
    "systemPrompt": {"sessionId": SESSION, "agentId": AGENT, "sessionKind": "direct",
                     "systemPrompt": "You are Ada, a careful research assistant. Cite your sources."},
    "userMessageInbound": {"sessionId": SESSION, "channelId": "7301240581932108032",
                           "text": "Can you summarise yesterday's incident report? My card is 4111 1111 1111 1111.",
                           "mediaIds": []},
    "interAgentMessage": {"senderSessionId": "7301240581932107777", "senderAgentId": "7301240581932107522",
                          "targetSessionId": SESSION, "isSubagentReport": True,
                          "text": "Done: 3 of 4 links checked, one returns 404 (docs/setup.md)."},
    "assistantMessageOutbound": {"sessionId": SESSION, "channelId": "7301240581932108032",
                                 "text": "Here is the summary: the database failover took 4 minutes and no data was lost."},
    "todoAdded": {"sessionId": SESSION, "texts": ["Check the backup logs", "Draft the incident summary"]},
    "notifyScheduled": {"sessionId": SESSION, "message": "Check whether the deploy finished", "delaySeconds": 900},
    "notifyDelivered": {"sessionId": SESSION, "notifyId": "7301240581932109000",
                        "message": "Check whether the deploy finished"},
    "sshConnectionOpening": {"sessionId": SESSION, "agentId": AGENT, "sshHostId": HOST, "hostDisplayName": "web-1",
                             "hostname": "web-1.internal.example", "port": 22, "connectionType": "direct",
                             "username": "deploy"},
    "sshCommandSending": {"sessionId": SESSION, "agentId": AGENT, "sshHostId": HOST, "hostDisplayName": "web-1",
                          "kind": "command", "command": "df -h /var", "path": None, "content": None,
                          "intent": "Check free disk space"},
    "sshCommandCompleted": {"sessionId": SESSION, "agentId": AGENT, "sshHostId": HOST, "hostDisplayName": "web-1",
                            "kind": "command", "command": "cat .env", "path": None, "exitCode": 0,
                            "output": "DATABASE_URL=postgres://app:s3cret@db:5432/app\nDEBUG=false\n",
                            "errorOutput": None, "isTruncated": False, "durationMs": 41.5},
    "sessionClearing": {"sessionId": SESSION, "agentId": AGENT, "trailingText": "Thanks, that's all for today.",
                        "messageCount": 48, "subagentCount": 2, "peerThreadCount": 1},
    "sessionClearCompleted": {"sessionId": SESSION, "agentId": AGENT, "deletedMessageCount": 48,
                              "deletedSubagentCount": 2, "deletedPeerThreadCount": 1},
    "cronJobFiring": {"cronJobId": "7301240581932110000", "agentId": AGENT, "kind": "cron_job",
                      "name": "Nightly report", "prompt": "Write the nightly status report for the team channel."},
    "cronJobCompleted": {"cronJobId": "7301240581932110000", "cronJobRunId": "7301240581932110001",
                         "sessionId": SESSION, "agentId": AGENT, "status": "succeeded"},
}


def example_context(hook: str) -> dict:
    """A realistic context for `hook`; any field the table gains later gets the generic sample."""
    return {**sample_context(HOOKS[hook]), **EXAMPLES.get(hook, {})}

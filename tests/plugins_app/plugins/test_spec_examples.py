"""The spec's example plugins behave as described: the project's copies (tests/example_plugins/) and, when
../shared/spec/examples is beside the checkout, the spec's own files installed unchanged."""

import pytest

from plugins_app.models import CancelLog
from tests.spec_examples import OWN, SPEC, SPEC_FOLDER

from ..conftest import PROMPT

pytestmark = pytest.mark.django_db

SSH = {"sessionId": "1", "agentId": "2", "sshHostId": "3", "hostDisplayName": "web-1"}


def install_example(api_client, examples, filename):
    response = api_client.post("/api/v1/plugins", {"name": filename.removesuffix(".ts"),
                                                   "source": examples.read(filename), "language": "typescript"},
                               format="json")
    assert response.status_code == 201, response.content
    return response.json()


def execute(api_client, hook, context):
    response = api_client.post(f"/api/v1/hooks/{hook}/execute", {"context": context}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.spec
def test_the_project_keeps_a_copy_of_every_spec_example():
    assert SPEC_FOLDER.is_dir(), f"{SPEC_FOLDER} is missing"
    assert OWN.names() == SPEC.names()


def test_every_example_file_compiles_and_defines_the_hook_its_name_says(api_client, examples):
    files = examples.names()
    assert len(files) >= 7
    for name in files:
        body = install_example(api_client, examples, name)
        assert body["hooks"], name
        if name != "cron-sentinel.ts":
            assert name.removesuffix(".ts").split("-")[-1] in body["hooks"], (name, body["hooks"])


def test_caveman_appends_its_guidance(api_client, examples):
    install_example(api_client, examples, "caveman-systemPrompt.ts")
    body = execute(api_client, "systemPrompt", PROMPT)
    assert body["value"] == "base\n\nAnswer tersely. Few words. No filler."


def test_card_mask_removes_card_numbers_and_leaves_other_text(api_client, examples):
    install_example(api_client, examples, "card-mask-userMessageInbound.ts")
    ctx = {"sessionId": "1", "channelId": None, "mediaIds": [],
           "text": "order 12345, pay with 4111-1111-1111-1111"}
    assert execute(api_client, "userMessageInbound", ctx)["value"] == \
        "order 12345, pay with [card number removed]"


def test_rm_guard_refuses_root_deletion_and_adds_dash_y(api_client, account, examples):
    install_example(api_client, examples, "rm-guard-sshCommandSending.ts")
    base = dict(SSH, kind="command", path=None, content=None)
    refused = execute(api_client, "sshCommandSending", dict(base, command="rm -rf /"))
    assert refused["outcome"] == "cancelled"
    assert refused["cancellation"]["reason"] == "refusing to delete the root filesystem"
    assert CancelLog.objects.filter(account=account, hook="sshCommandSending").count() == 1
    rewritten = execute(api_client, "sshCommandSending", dict(base, command="apt-get install jq"))
    assert rewritten["value"] == {"command": "apt-get install -y jq", "path": None, "content": None}
    harmless = execute(api_client, "sshCommandSending", dict(base, command="rm -rf ./build"))
    assert harmless["outcome"] == "unchanged"
    file_op = execute(api_client, "sshCommandSending", dict(base, kind="read_file", command=None, path="/etc/hosts"))
    assert file_op["outcome"] == "unchanged" and file_op["trace"][0]["status"] == "ran"


def test_aws_redact_rewrites_output_and_keeps_nulls(api_client, examples):
    install_example(api_client, examples, "aws-redact-sshCommandCompleted.ts")
    ctx = dict(SSH, kind="command", command="env", path=None, exitCode=0, isTruncated=False, durationMs=12,
               output="KEY=AKIAABCDEFGHIJKLMNOP\nok", errorOutput=None)
    body = execute(api_client, "sshCommandCompleted", ctx)
    assert body["value"] == {"output": "KEY=[redacted AWS key]\nok", "errorOutput": None}
    assert body["trace"][0]["status"] == "ran"


def test_cron_sentinel_rewrites_or_holds_and_logs(api_client, account, examples):
    install_example(api_client, examples, "cron-sentinel.ts")
    ctx = {"cronJobId": "77", "agentId": "2", "kind": "cron_job", "name": "nightly", "prompt": "do the thing"}
    fired = execute(api_client, "cronJobFiring", ctx)
    assert fired["value"] == 'do the thing\n\n[cron-sentinel] fired cron_job "nightly".'
    held = execute(api_client, "cronJobFiring", dict(ctx, prompt="wait #hold"))
    assert held["outcome"] == "cancelled"
    assert held["cancellation"]["reason"] == "[cron-sentinel] refused: prompt carries #hold"
    completed = execute(api_client, "cronJobCompleted", {"cronJobId": "77", "cronJobRunId": "9", "sessionId": "5",
                                                         "agentId": "2", "status": "succeeded"})
    assert completed["value"] is None and completed["trace"][0]["status"] == "ran"

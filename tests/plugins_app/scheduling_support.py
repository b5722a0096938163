"""Fixtures shared by the cron and timer unit tests: a platform stub wired to the account, eager Celery."""

import pytest

from middleware_hub.celery import app
from plugins_app.services.host import platform as platform_service
from tests.platform_stub import PlatformStub

FIRING_REWRITE = """globalThis.middleware.cronJobFiring = async (c, tools) =>
  c.prompt.includes("#hold") ? tools.cancel("held for maintenance") : c.prompt + " [checked]";"""
COMPLETED_COUNTER = """globalThis.middleware.cronJobCompleted = async (c) => {
  host.log("info", "completed " + c.cronJobRunId + " " + c.status + " " + c.sessionId);
};"""


@pytest.fixture
def platform(account):
    stub = PlatformStub().start()
    platform_service.configure(account, {"baseUrl": stub.base_url, "signingSecret": stub.secret})
    yield stub
    stub.stop()


@pytest.fixture
def eager():
    """Tasks run in the caller, as unit tests want; the integration tests use real workers."""
    saved = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield app
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved

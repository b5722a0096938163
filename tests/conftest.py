"""Shared fixtures (accounts and authenticated API clients) and service-marker gating."""
import os
from dataclasses import replace

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, ApiKey
from plugins_app.services.execution.chain_cache import chain_cache
from plugins_app.services.plugins import installations as plugins

# Fixture modules shared across test folders, registered once instead of imported by each test module.
pytest_plugins = [
    "tests.plugins_app.admin_support",
    "tests.plugins_app.catalog_support",
    "tests.plugins_app.scheduling_support",
    "tests.plugins_app.tracing_support",
    "tests.integration.celery_services",
    "tests.spec_examples",
]

# Tests with these markers need binaries that CI installs (.ci/run sets the
# variables); locally they are skipped unless the variable is set (or, for the
# browser, Debian's chromium is installed), and with the variable set a missing
# binary is a failure, not a skip.
SERVICE_MARKERS = {
    "ssh": ("HUB_TEST_SSH", None),
    "browser": ("HUB_TEST_BROWSER", "/usr/bin/chromium"),
}


def pytest_sessionfinish(session, exitstatus):
    """What this process's buffered writers still hold is rows of tests whose accounts were rolled back
    or dropped with the test database: let go, so the exit's flush does not write them to a database
    that no longer has them (each failing, and logged to a stream pytest has already closed)."""
    from accounts import key_use
    from plugins_app.services.observability import latency, metering
    from plugins_app.services.versions import recording

    for writer in (key_use.recorder, latency.recorder, metering.meter, recording.recorder):
        with writer._lock:
            writer.take_pending()


def pytest_collection_modifyitems(config, items):
    for marker, (variable, binary) in SERVICE_MARKERS.items():
        if os.environ.get(variable) or (binary and os.path.exists(binary)):
            continue
        if binary:
            reason = f"{marker} tests need {binary}, which is not installed (apt-get install chromium)"
        else:
            reason = f"set {variable}=1 to run {marker} tests"
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def fresh_hub_state(settings):
    # Ids can be reused after a rolled-back test on SQLite: start every test with a cold
    # chain cache, and write metering at once so tests can read it.
    settings.HUB_METERING_FLUSH_SECONDS = 0
    # Tests' platforms are local stubs: allow loopback whatever DJANGO_DEBUG says.
    settings.HUB_HOST = replace(settings.HUB_HOST, platform_allowed_hosts=["127.0.0.1", "::1"])
    chain_cache.clear()
    yield
    chain_cache.clear()


def _client_for(raw_key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


@pytest.fixture
def account(db):
    return Account.objects.create(name="acme")


@pytest.fixture
def api_key(account):
    """The raw API key of `account`."""
    _, raw_key = ApiKey.issue(account, name="tests")
    return raw_key


@pytest.fixture
def api_client(api_key):
    return _client_for(api_key)


@pytest.fixture
def other_account(db):
    return Account.objects.create(name="globex")


@pytest.fixture
def other_api_client(other_account):
    _, raw_key = ApiKey.issue(other_account, name="tests")
    return _client_for(raw_key)


@pytest.fixture
def install(account):
    def do(source, name=None, language="javascript", target=None, **kw):
        do.count += 1
        return plugins.install_plugin(target or account, name=name or f"plugin {do.count}", source=source,
                                      language=language, **kw)
    do.count = 0
    return do

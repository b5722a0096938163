"""One typed config per concern, read once from the environment: defaults, and bad values refused
at start with the variable's name."""

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from plugins_app.runtime.environment import ConfigError, Env
from plugins_app.services.engine.config import AdmissionConfig
from plugins_app.services.execution.config import QuarantineConfig
from plugins_app.services.host.config import HostConfig
from plugins_app.services.observability.config import MetricsConfig
from plugins_app.services.scheduling.config import SchedulingConfig
from plugins_app.services.ssh.config import SshConfig

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = [AdmissionConfig, QuarantineConfig, MetricsConfig, SchedulingConfig, SshConfig]


@pytest.mark.parametrize("config", CONFIGS)
def test_an_empty_environment_gives_the_documented_defaults(config):
    assert config.from_env({}) == config()


def test_the_host_surface_allows_loopback_for_the_platform_only_on_a_development_server():
    assert HostConfig.from_env({}, debug=True).platform_allowed_hosts == ("127.0.0.0/8", "::1")
    assert HostConfig.from_env({}, debug=False) == HostConfig()
    assert HostConfig.from_env({"HUB_PLATFORM_ALLOWED_HOSTS": " a.example , 10.0.0.0/8,"},
                               debug=True).platform_allowed_hosts == ("a.example", "10.0.0.0/8")


def test_values_are_read_with_their_types():
    config = SchedulingConfig.from_env({"HUB_CRON_MIN_INTERVAL_SECONDS": "5", "HUB_NOTIFY_SWEEP_SECONDS": " 3 "})
    assert (config.cron_min_interval_seconds, config.notify_sweep_seconds) == (5, 3)
    assert SshConfig.from_env({"HUB_SSH_CONNECT_TIMEOUT_SECONDS": "2.5"}).connect_timeout_seconds == 2.5
    assert HostConfig.from_env({"HUB_FETCH_ALLOW_PRIVATE": "yes"}, debug=False).fetch_allow_private is True


@pytest.mark.parametrize(("config", "variable", "value", "says"), [
    (QuarantineConfig, "HUB_QUARANTINE_STRIKES", "three", "HUB_QUARANTINE_STRIKES must be a whole number, not 'three'"),
    (QuarantineConfig, "HUB_QUARANTINE_STRIKES", "0", "HUB_QUARANTINE_STRIKES must be 1 or more, not 0"),
    (AdmissionConfig, "HUB_EXECUTE_CONCURRENCY", "-1", "HUB_EXECUTE_CONCURRENCY must be 0 or more, not -1"),
    (AdmissionConfig, "HUB_EXECUTE_PER_ACCOUNT_SCOPE", "cluster",
     "HUB_EXECUTE_PER_ACCOUNT_SCOPE must be one of 'machine', 'process'"),
    (SshConfig, "HUB_SSH_CONNECT_TIMEOUT_SECONDS", "nan", "HUB_SSH_CONNECT_TIMEOUT_SECONDS must be a finite number"),
    (SshConfig, "HUB_SSH_COMMAND_TIMEOUT_SECONDS", "inf", "HUB_SSH_COMMAND_TIMEOUT_SECONDS must be a finite number"),
    (HostConfig, "HUB_FETCH_ALLOW_PRIVATE", "maybe", "HUB_FETCH_ALLOW_PRIVATE must be one of 1/0"),
])
def test_a_bad_value_is_refused_naming_the_variable(config, variable, value, says):
    read = (lambda env: config.from_env(env, debug=False)) if config is HostConfig else config.from_env
    with pytest.raises(ConfigError, match=re.escape(says)):
        read({variable: value})


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        QuarantineConfig().strikes = 1   # type: ignore[misc]


def test_a_blank_variable_counts_as_unset():
    assert Env({"X": "  "}).integer("X", 7) == 7


def test_django_refuses_to_start_with_a_bad_value_and_says_which():
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, env={**clean, "DJANGO_SETTINGS_MODULE": "middleware_hub.settings",
                                                        "HUB_QUARANTINE_WINDOW_SECONDS": "ten minutes"})
    assert result.returncode != 0
    assert "HUB_QUARANTINE_WINDOW_SECONDS must be a whole number, not 'ten minutes'" in result.stderr

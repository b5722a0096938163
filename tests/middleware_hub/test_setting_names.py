"""The engine's settings are read from their HUB_* variables once, checked at start; the old HOOK_* names are gone."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plugins_app.runtime.config import default_processes

ROOT = Path(__file__).resolve().parents[2]
READ = ("import json; from django.conf import settings; import django; django.setup();"
        "e = settings.HUB_ENGINE;"
        "print(json.dumps([e.budget_ms, e.processes, e.lane_processes, e.isolate_memory_mb, e.cpu_ms,"
        " [n for n in dir(settings) if n.startswith('HOOK_')]]))")


def start_django(**env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "HOOK_"))}
    return subprocess.run([sys.executable, "-c", READ], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**clean, "DJANGO_SETTINGS_MODULE": "middleware_hub.settings", **env})


def read_settings(**env: str) -> list:
    result = start_django(**env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_engine_settings_are_read_from_their_variables():
    assert read_settings(HUB_BUDGET_MS="1234", HUB_ENGINE_PROCESSES="3", HUB_LANE_PROCESSES="0",
                         HUB_ISOLATE_MEMORY_MB="128", HUB_CPU_MS="250") == [1234, 3, 0, 128, 250, []]


def test_the_old_hook_names_are_no_longer_read():
    values = read_settings(HOOK_BUDGET_MS="777", HOOK_ENGINE_PROCESSES="9", HOOK_LANE_PROCESSES="4",
                           HOOK_ISOLATE_MEMORY_MB="64")
    assert values == [5000, default_processes(), 1, 256, 1000, []]   # the defaults, and no HOOK_* setting


@pytest.mark.parametrize(("name", "value", "message"), [
    ("HUB_BUDGET_MS", "5s", "HUB_BUDGET_MS must be a whole number, not '5s'"),
    ("HUB_ENGINE_PROCESSES", "0", "HUB_ENGINE_PROCESSES must be 1 or more, not 0"),
    ("HUB_LANE_PROCESSES", "-1", "HUB_LANE_PROCESSES must be 0 or more, not -1"),
    ("HUB_ISOLATE_MEMORY_MB", "256MB", "HUB_ISOLATE_MEMORY_MB must be a whole number, not '256MB'"),
])
def test_a_bad_engine_value_stops_the_start_naming_the_variable(name, value, message):
    result = start_django(**{name: value})
    assert result.returncode != 0
    assert message in result.stderr


def test_gunicorn_refuses_a_bad_engine_value_before_it_starts_anything():
    # gunicorn.conf.py's on_starting reads the same config before it starts the engine tier or a worker.
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "HOOK_"))}
    result = subprocess.run([sys.executable, "-m", "gunicorn", "middleware_hub.wsgi", "-b", "127.0.0.1:0"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={**clean, "HUB_LANE_PROCESSES": "some"})
    assert result.returncode != 0
    assert "HUB_LANE_PROCESSES must be a whole number, not 'some'" in result.stderr

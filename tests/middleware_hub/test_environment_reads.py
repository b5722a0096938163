"""One reader for the environment: Django's settings read their variables as the typed configs do, so a
flag it cannot read stops the start naming the variable, and HUB_ENGINE_PROCESSES has one default that
Django's settings, gunicorn.conf.py and a supervisor run apart all take."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plugins_app.runtime.config import default_processes, machine_cores, shared_engines_for
from plugins_app.runtime.environment import Env
from tests.devhub.support import wait_until

ROOT = Path(__file__).resolve().parents[2]
FLAG_WORDS = "1/0, true/false, yes/no, on/off"


def hub_environ(**env: str) -> dict[str, str]:
    """This process's environment without the hub's own variables, plus `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "HUB_", "CELERY_"))}
    return {**clean, "DJANGO_SETTINGS_MODULE": "middleware_hub.settings", **env}


def start_django(expression: str, **env: str) -> subprocess.CompletedProcess:
    """Django set up in a new process with `env`, printing `expression` (over the settings `s`) as JSON."""
    script = f"import json, django; django.setup(); from django.conf import settings as s; print(json.dumps({expression}))"
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=hub_environ(**env))


def django_value(expression: str, **env: str):
    result = start_django(expression, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("name", "value"), [
    ("DJANGO_DEBUG", "maybe"),                    # read as False before: a production site by accident
    ("DJANGO_SECURE_SSL_REDIRECT", "enabled"),
    ("DJANGO_SESSION_COOKIE_SECURE", "2"),
    ("CELERY_TASK_ALWAYS_EAGER", "y"),
])
def test_an_unrecognised_flag_stops_the_start_naming_the_variable(name, value):
    result = start_django("s.DEBUG", **{name: value})
    assert result.returncode != 0
    assert f"{name} must be one of {FLAG_WORDS}, not {value!r}" in result.stderr


def test_every_spelling_of_a_flag_is_read():
    env = Env({"ON": " Yes ", "OFF": "off", "EMPTY": ""})
    for word in ("1", "true", "TRUE", "yes", "on"):
        assert Env({"X": word}).flag("X", False) is True
    for word in ("0", "false", "No", "off"):
        assert Env({"X": word}).flag("X", True) is False
    assert (env.flag("ON", False), env.flag("OFF", True), env.flag("EMPTY", True), env.flag("UNSET", False)) == (
        True, False, True, False)
    # The settings read theirs this way: "off" is off, "yes" is on, and unset or empty is the default.
    assert django_value("[s.DEBUG, s.SECURE_SSL_REDIRECT, s.CELERY_TASK_ALWAYS_EAGER]", DJANGO_DEBUG="off",
                        DJANGO_SECURE_SSL_REDIRECT="yes", CELERY_TASK_ALWAYS_EAGER="") == [False, True, False]


def test_a_number_setting_it_cannot_read_stops_the_start_naming_the_variable():
    result = start_django("s.SECURE_HSTS_SECONDS", DJANGO_SECURE_HSTS_SECONDS="a year")
    assert result.returncode != 0
    assert "DJANGO_SECURE_HSTS_SECONDS must be a whole number, not 'a year'" in result.stderr


def gunicorn_conf():
    """gunicorn.conf.py loaded as gunicorn loads it: a module of its own, run from the file."""
    spec = importlib.util.spec_from_file_location("hub_gunicorn_conf", ROOT / "gunicorn.conf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_settings_and_gunicorn_agree_on_the_engine_count(monkeypatch):
    monkeypatch.delenv("HUB_ENGINE_PROCESSES", raising=False)
    in_settings = django_value("s.HUB_ENGINE.processes")
    assert in_settings == gunicorn_conf().engine_config().processes == default_processes()
    assert in_settings == shared_engines_for(machine_cores()) >= 2   # one per core and one more

    monkeypatch.setenv("HUB_ENGINE_PROCESSES", "5")
    assert django_value("s.HUB_ENGINE.processes", HUB_ENGINE_PROCESSES="5") == 5
    assert gunicorn_conf().engine_config().processes == 5


def test_gunicorn_refuses_a_worker_thread_count_it_cannot_read(monkeypatch):
    monkeypatch.setenv("HUB_WORKER_THREADS", "lots")
    with pytest.raises(ValueError, match="^HUB_WORKER_THREADS must be a whole number, not 'lots'"):
        gunicorn_conf()


@pytest.mark.slow
def test_a_supervisor_run_apart_starts_the_same_engine_count(tmp_path):
    directory = tmp_path / "engines"
    supervisor = subprocess.Popen([sys.executable, "-m", "plugins_app.runtime.engine.supervisor", str(directory)],
                                  cwd=ROOT, env=hub_environ(HUB_LANE_PROCESSES="0"),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def written_layout() -> dict | None:
        """tier.json once whole (the supervisor writes it when its sockets listen)."""
        assert supervisor.poll() is None, supervisor.stderr.read() if supervisor.stderr else ""
        try:
            return json.loads((directory / "tier.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    try:
        layout = wait_until(written_layout, 60, "the supervisor's tier.json")
        assert len(layout["engines"]) == default_processes()
    finally:
        supervisor.terminate()
        try:
            supervisor.wait(20)
        except subprocess.TimeoutExpired:
            supervisor.kill()
            supervisor.wait()

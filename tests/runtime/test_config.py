"""EngineConfig: the engine's variables read once, and refused by name when unusable."""

import subprocess
import sys

import pytest

from plugins_app.runtime.config import (
    DEFAULT_BUDGET_MS,
    DEFAULT_ISOLATE_MEMORY_MB,
    ConfigError,
    EngineConfig,
    default_processes,
    shared_engines_for,
)
from plugins_app.runtime.launch import PROJECT_ROOT, EngineArgs


def test_unset_and_empty_variables_take_the_defaults():
    for environ in ({}, {"HUB_BUDGET_MS": "", "HUB_ISOLATE_MEMORY_MB": "  "}):
        config = EngineConfig.from_env(environ)
        assert (config.budget_ms, config.isolate_memory_mb) == (DEFAULT_BUDGET_MS, DEFAULT_ISOLATE_MEMORY_MB)
    # One default for the engine count, whoever starts the engines: one per core of this machine, and one more.
    assert EngineConfig.from_env({}).processes == EngineConfig().processes == default_processes()
    assert EngineConfig.from_env({"HUB_ENGINE_PROCESSES": "3"}).processes == 3
    assert [shared_engines_for(cores) for cores in (0, 1, 2, 8)] == [2, 2, 3, 9]


def test_values_are_read_as_whole_numbers():
    config = EngineConfig.from_env({"HUB_ENGINE_PROCESSES": " 4 ", "HUB_LANE_PROCESSES": "0",
                                    "HUB_ISOLATE_MEMORY_MB": "512", "HUB_BUDGET_MS": "250"})
    assert config == EngineConfig(processes=4, lane_processes=0, isolate_memory_mb=512, budget_ms=250)


@pytest.mark.parametrize(("name", "value"), [
    ("HUB_ENGINE_PROCESSES", "0"), ("HUB_ENGINE_PROCESSES", "two"), ("HUB_LANE_PROCESSES", "-1"),
    ("HUB_ISOLATE_MEMORY_MB", "0"), ("HUB_ISOLATE_MEMORY_MB", "1.5"), ("HUB_BUDGET_MS", "0"),
])
def test_an_unusable_value_is_refused_by_name(name, value):
    with pytest.raises(ConfigError, match=f"^{name} must be "):
        EngineConfig.from_env({name: value})


def test_the_supervisor_refuses_an_unusable_value_before_starting_an_engine(tmp_path):
    result = subprocess.run([sys.executable, "-m", "plugins_app.runtime.engine.supervisor", str(tmp_path / "engines")],
                            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60,
                            env={"HUB_ISOLATE_MEMORY_MB": "lots", "PATH": ""})
    assert result.returncode == 2
    assert "HUB_ISOLATE_MEMORY_MB must be a whole number, not 'lots'" in result.stderr
    assert not (tmp_path / "engines").exists()


def test_an_engine_command_line_reads_back_as_it_was_written():
    for args in (EngineArgs(128, listen=5, lifeline=6, nice=10), EngineArgs(256, conn=7, spare=False)):
        assert EngineArgs.parse(args.argv()) == args

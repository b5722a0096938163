"""Engine settings are HUB_*; their old HOOK_* variable names still work for a release, with a warning."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READ = ("import json, warnings; warnings.simplefilter('always');"
        "from django.conf import settings; import django; django.setup();"
        "print(json.dumps([settings.HUB_BUDGET_MS, settings.HUB_ENGINE_PROCESSES, settings.HOOK_BUDGET_MS]))")


def read_settings(**env: str) -> tuple[list[int], str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "HOOK_"))}
    result = subprocess.run([sys.executable, "-c", READ], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={**clean, "DJANGO_SETTINGS_MODULE": "middleware_hub.settings", **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


def test_the_new_names_are_read_without_a_warning():
    values, stderr = read_settings(HUB_BUDGET_MS="1234", HUB_ENGINE_PROCESSES="3")
    assert values == [1234, 3, 1234]
    assert "deprecated" not in stderr


def test_an_old_name_still_works_and_says_which_name_replaces_it():
    values, stderr = read_settings(HOOK_BUDGET_MS="777")
    assert values == [777, 2, 777]
    assert "HOOK_BUDGET_MS is deprecated: set HUB_BUDGET_MS instead" in stderr


def test_the_new_name_wins_over_the_old_one():
    values, stderr = read_settings(HUB_BUDGET_MS="1000", HOOK_BUDGET_MS="9")
    assert values[0] == 1000 and "deprecated" not in stderr

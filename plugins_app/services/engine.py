"""The engine tier this process uses: the machine's (served by gunicorn's supervisor) or its own."""

import atexit
import os
import threading

from django.conf import settings

from plugins_app.runtime.protocol import DEFAULT_LIMITS
from plugins_app.runtime.supervisor import local_supervisor, tier_from_directory
from plugins_app.runtime.tier import Tier

from .admission import get_gate

_tier: Tier | None = None
_lock = threading.Lock()


def get_tier() -> Tier:
    """HUB_ENGINE_DIR names a running supervisor's directory (gunicorn.conf.py starts one for all
    its workers); without it this process starts engines of its own on first use."""
    global _tier
    with _lock:
        if _tier is None:
            os.environ.setdefault("HUB_ISOLATE_MEMORY_MB", str(settings.HUB_ISOLATE_MEMORY_MB))
            os.environ.setdefault("HUB_ENGINE_LIMITS", DEFAULT_LIMITS.as_json())
            directory = os.environ.get("HUB_ENGINE_DIR")
            if directory:
                _tier = tier_from_directory(directory)
            else:
                supervisor = local_supervisor(settings.HUB_ENGINE_PROCESSES, settings.HUB_LANE_PROCESSES)
                atexit.register(supervisor.stop)
                _tier = supervisor.tier()
            # While a call waits on its engine, its place in the fair admission goes to another.
            _tier.waiting = get_gate().waiting
        return _tier



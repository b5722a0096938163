"""The engine tier this process uses: the machine's (served by gunicorn's supervisor) or its own."""

import atexit
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from django.conf import settings

from plugins_app.runtime.engine.supervisor import local_supervisor
from plugins_app.runtime.web.tier import Tier, tier_for, tier_from_directory

_tier: Tier | None = None
_lock = threading.Lock()
# Around a call's wait on its engine; the app's ready() hands in the admission gate's, so the call's
# place goes to another meanwhile.
_waiting: Callable[[], AbstractContextManager[None]] | None = None


def configure(*, waiting: Callable[[], AbstractContextManager[None]]) -> None:
    global _waiting
    _waiting = waiting


def engine_key(account) -> str:
    """The name an account's compartments go by in the engines."""
    return f"account-{account.pk}"


def get_tier() -> Tier:
    """HUB_ENGINE_DIR names a running supervisor's directory (gunicorn.conf.py starts one for all
    its workers); without it this process starts engines of its own on first use."""
    global _tier
    with _lock:
        if _tier is None:
            directory = os.environ.get("HUB_ENGINE_DIR")
            if directory:
                _tier = tier_from_directory(directory)
            else:
                supervisor = local_supervisor(settings.HUB_ENGINE.processes, settings.HUB_ENGINE.lane_processes,
                                              memory_mb=settings.HUB_ENGINE.isolate_memory_mb)
                atexit.register(supervisor.stop)
                _tier = tier_for(supervisor.describe())
            _tier.waiting = _waiting
        return _tier



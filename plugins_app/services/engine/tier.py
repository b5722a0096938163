"""The engine tier this process uses: the machine's (served by gunicorn's supervisor) or its own."""

import atexit
import logging
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from django.conf import settings
from django.db import transaction

from plugins_app.runtime.engine.supervisor import local_supervisor
from plugins_app.runtime.environment import Env
from plugins_app.runtime.web.tier import Tier, tier_for, tier_from_directory

logger = logging.getLogger(__name__)
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
    return _key(account.pk)


def _key(account_id: int) -> str:
    return f"account-{account_id}"


def drop_compartments(account_id: int, installation_ids: list[int]) -> None:
    """Once the transaction that uninstalled, disabled or redeployed these installations commits,
    every engine drops their compartments and code, and the memory their module state held goes
    back at once instead of at the next replacement of an isolate."""
    key, ids = _key(account_id), [str(i) for i in installation_ids]

    def send() -> None:
        try:
            get_tier().unload(key, ids)
        except Exception:   # the change stands; the memory goes back when the isolate is next replaced
            logger.exception("could not drop the compartments of installations %s of account %s", ids, account_id)

    transaction.on_commit(send)


def get_tier() -> Tier:
    """HUB_ENGINE_DIR names a running supervisor's directory (gunicorn.conf.py starts one for all
    its workers); without it this process starts engines of its own on first use."""
    global _tier
    with _lock:
        if _tier is None:
            directory = Env(os.environ).text("HUB_ENGINE_DIR")
            if directory:
                _tier = tier_from_directory(directory)
            else:
                supervisor = local_supervisor(settings.HUB_ENGINE.processes, settings.HUB_ENGINE.lane_processes,
                                              memory_mb=settings.HUB_ENGINE.isolate_memory_mb,
                                              engine_memory_mb=settings.HUB_ENGINE.engine_memory_mb)
                atexit.register(supervisor.stop)
                _tier = tier_for(supervisor.describe())
            _tier.waiting = _waiting
        return _tier



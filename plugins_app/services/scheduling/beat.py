"""Beat's scheduler: django-celery-beat's, with the time each cron slot was sent added to its task, so
that the worker can tell one slot sent by two beats from two slots (cron.fire_scheduled_slot fires it once)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from django_celery_beat.schedulers import DatabaseScheduler

from plugins_app.services.scheduling.task_queue import FIRE_CRON_SLOT


class _Sent:
    """An entry as sent: the scheduler's own, with other keyword arguments."""

    def __init__(self, entry: Any, kwargs: dict):
        self._entry, self.kwargs = entry, kwargs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._entry, name)


class SlotScheduler(DatabaseScheduler):
    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        if entry.task != FIRE_CRON_SLOT:
            return super().apply_async(entry, producer, advance, **kwargs)
        entry = self.reserve(entry) if advance else entry
        sent = _Sent(entry, {**(entry.kwargs or {}), "slot_at": timezone.now().isoformat()})
        return super().apply_async(sent, producer, advance=False, **kwargs)

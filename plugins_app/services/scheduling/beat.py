"""Beat's scheduler: django-celery-beat's, with the time each cron slot was sent added to its task, so
that every beat sending one slot names the same slot (two beats fire it once: cron.slot_key)."""

from __future__ import annotations

import copy

from django.utils import timezone
from django_celery_beat.schedulers import DatabaseScheduler

from plugins_app.services.scheduling.task_queue import FIRE_CRON_SLOT


class SlotScheduler(DatabaseScheduler):
    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        if entry.task != FIRE_CRON_SLOT:
            return super().apply_async(entry, producer, advance, **kwargs)
        entry = self.reserve(entry) if advance else entry
        sent = copy.copy(entry)
        sent.kwargs = {**(entry.kwargs or {}), "slot_at": timezone.now().isoformat()}
        return super().apply_async(sent, producer, advance=False, **kwargs)

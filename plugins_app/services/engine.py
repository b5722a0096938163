"""The process-wide engine pool, configured from settings and started on first use."""

from django.conf import settings

from plugins_app.runtime.pool import EnginePool, default_pool


def get_pool() -> EnginePool:
    return default_pool(size=settings.HOOK_ENGINE_PROCESSES, memory_mb=settings.HOOK_ISOLATE_MEMORY_MB)

"""plugins_app's models, one module per concern."""

from .audit import CancelLog, HandlerWarning, ImmutableRecordError, UsageDaily
from .host import PlatformConfig
from .plugins import ChainEntry, Installation, Plugin
from .scheduling import CronJob, CronRun, Notification

__all__ = ["CancelLog", "ChainEntry", "CronJob", "CronRun", "HandlerWarning", "ImmutableRecordError",
           "Installation", "Notification", "PlatformConfig", "Plugin", "UsageDaily"]

"""plugins_app's models, one module per concern."""

from .audit import CancelLog, HandlerWarning, ImmutableRecordError, UsageDaily
from .host import PlatformConfig
from .plugins import ChainEntry, Installation, Plugin

__all__ = ["CancelLog", "ChainEntry", "HandlerWarning", "ImmutableRecordError", "Installation",
           "PlatformConfig", "Plugin", "UsageDaily"]

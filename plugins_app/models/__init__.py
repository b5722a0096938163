"""plugins_app's models, one module per concern."""

from .audit import CancelLog, HandlerWarning, ImmutableRecordError, UsageDaily
from .host import Agent, PlatformConfig, PluginLog, WorkspaceFile
from .kv import KvEntry
from .latency import LatencyHistogram
from .plugins import ChainEntry, Installation, Plugin, StrikeBook
from .recorded import RecordedCall
from .scheduling import CronJob, CronRun, Notification
from .secrets import Secret
from .shadow import ShadowSample, ShadowStat
from .ssh import SshHost, SshTurn
from .versions import AccountChange, PluginVersion

__all__ = ["AccountChange", "Agent", "CancelLog", "ChainEntry", "CronJob", "CronRun", "HandlerWarning",
           "ImmutableRecordError", "Installation", "KvEntry", "LatencyHistogram", "Notification", "PlatformConfig",
           "Plugin", "PluginLog", "PluginVersion", "RecordedCall", "Secret", "ShadowSample", "ShadowStat", "SshHost",
           "SshTurn", "StrikeBook", "UsageDaily",
           "WorkspaceFile"]

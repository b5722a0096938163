"""URLs of the platform API, mounted at /api/v1/."""

from django.urls import path, re_path

from plugins_app.api.account import views as account_views
from plugins_app.api.audit import views as audit_views
from plugins_app.api.base import UnknownPathView
from plugins_app.api.execution import views as execution_views
from plugins_app.api.host import views as host_views
from plugins_app.api.plugins import catalog_views, kv_views, sdk_views, views
from plugins_app.api.scheduling import views as scheduling_views
from plugins_app.api.secrets import views as secret_views
from plugins_app.api.ssh import views as ssh_views
from plugins_app.api.versions import views as version_views

urlpatterns = [
    path("ping", execution_views.PingView.as_view(), name="ping"),
    path("hooks", execution_views.HookListView.as_view(), name="hook-list"),
    # Served by WSGI (runserver, gthread workers) the synchronous view; served by ASGI, the execute
    # handler (api/execution/asgi_handler.py) swaps in its async twin for this route.
    path("hooks/<str:hook>/execute", execution_views.HookExecuteView.as_view(), name="hook-execute"),
    path("hooks/<str:hook>/try", execution_views.HookTryView.as_view(), name="hook-try"),
    path("hooks/<str:hook>/explain", execution_views.HookExplainView.as_view(), name="hook-explain"),
    path("plugins", views.PluginListView.as_view(), name="plugin-list"),
    path("plugins/<str:installation_id>", views.PluginDetailView.as_view(), name="plugin-detail"),
    path("plugins/<str:installation_id>/grant", views.PluginGrantView.as_view(), name="plugin-grant"),
    path("plugins/<str:installation_id>/kv", kv_views.PluginKvView.as_view(), name="plugin-kv"),
    path("plugins/<str:installation_id>/release", views.PluginReleaseView.as_view(), name="plugin-release"),
    path("plugins/<str:installation_id>/settings", catalog_views.PluginSettingsView.as_view(),
         name="plugin-settings"),
    path("plugins/<str:installation_id>/versions", version_views.VersionListView.as_view(), name="version-list"),
    path("plugins/<str:installation_id>/versions/<str:number>/deploy", version_views.VersionDeployView.as_view(),
         name="version-deploy"),
    path("plugins/<str:installation_id>/rollback", version_views.RollbackView.as_view(), name="plugin-rollback"),
    path("plugins/<str:installation_id>/check", version_views.CheckView.as_view(), name="plugin-check"),
    path("plugins/<str:installation_id>/shadow", version_views.ShadowView.as_view(), name="plugin-shadow"),
    path("plugins/<str:installation_id>/promote", version_views.PromoteView.as_view(), name="plugin-promote"),
    path("changes", version_views.ChangeListView.as_view(), name="change-list"),
    path("cancellations/<str:entry_id>/replay", version_views.ReplayView.as_view(), name="cancellation-replay"),
    path("recorded-calls", version_views.RecordedCallListView.as_view(), name="recorded-call-list"),
    path("recorded-calls/<str:call_id>/replay", version_views.RecordedCallReplayView.as_view(),
         name="recorded-call-replay"),
    path("catalog", catalog_views.CatalogView.as_view(), name="catalog"),
    path("chains/<str:hook>", views.ChainView.as_view(), name="chain"),
    path("cancellations", audit_views.CancellationListView.as_view(), name="cancellation-list"),
    path("warnings", audit_views.WarningListView.as_view(), name="warning-list"),
    path("usage", audit_views.UsageListView.as_view(), name="usage-list"),
    path("platform", host_views.PlatformView.as_view(), name="platform"),
    path("logs", host_views.LogListView.as_view(), name="log-list"),
    path("agents", host_views.AgentListView.as_view(), name="agent-list"),
    path("agents/<str:agent_id>", host_views.AgentDetailView.as_view(), name="agent-detail"),
    path("cron-jobs", scheduling_views.CronJobListView.as_view(), name="cron-job-list"),
    path("cron-jobs/<str:job_id>", scheduling_views.CronJobDetailView.as_view(), name="cron-job-detail"),
    path("cron-jobs/<str:job_id>/run", scheduling_views.CronJobRunNowView.as_view(), name="cron-job-run"),
    path("cron-jobs/<str:job_id>/runs", scheduling_views.CronJobRunListView.as_view(), name="cron-job-runs"),
    path("cron-runs/<str:run_id>", scheduling_views.CronRunDetailView.as_view(), name="cron-run-detail"),
    path("cron-runs/<str:run_id>/complete", scheduling_views.CronRunCompleteView.as_view(), name="cron-run-complete"),
    path("notifications", scheduling_views.NotificationListView.as_view(), name="notification-list"),
    path("notifications/<str:notification_id>", scheduling_views.NotificationDetailView.as_view(),
         name="notification-detail"),
    path("ssh-hosts", ssh_views.SshHostListView.as_view(), name="ssh-host-list"),
    path("ssh-hosts/<str:host_id>", ssh_views.SshHostDetailView.as_view(), name="ssh-host-detail"),
    path("ssh/execute", ssh_views.SshExecuteView.as_view(), name="ssh-execute"),
    path("secrets", secret_views.SecretListView.as_view(), name="secret-list"),
    path("secrets/<str:name>", secret_views.SecretDetailView.as_view(), name="secret-detail"),
    path("account/export", account_views.AccountExportView.as_view(), name="account-export"),
    path("tail", account_views.TailView.as_view(), name="tail"),
    path("sdk/middleware.d.ts", sdk_views.SdkTypesView.as_view(), name="sdk-types"),
    re_path(r"^", UnknownPathView.as_view(), name="unknown-path"),   # last: what no route above matched
]

"""App configuration for plugins_app, and the one place its parts are wired together."""

from django.apps import AppConfig


class PluginsAppConfig(AppConfig):
    name = "plugins_app"
    verbose_name = "Plugins and hooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here: models must be loaded before the services are.
        from django.core import checks
        from django.db.models.signals import post_delete

        from plugins_app.models import CronJob
        from plugins_app.models.scheduling import delete_periodic_task
        from plugins_app.services.engine import admission, async_admission, tier
        from plugins_app.services.execution import invoke, quarantine
        from plugins_app.services.execution.observers import after_chain
        from plugins_app.services.host import log, platform, registry
        from plugins_app.services.observability import latency, metering, metrics, tail, tracing
        from plugins_app.services.scheduling import task_queue
        from plugins_app.services.versions import recording, shadow

        # Fair admission reports to the metrics (waits, rests, calls shed); a call waiting on its engine gives its place away.
        admission.configure(on_wait=metrics.admission_waited, on_rest=metrics.admission_rested,
                            on_shed=metrics.admission_shed)
        tier.configure(waiting=lambda: admission.get_gate().waiting(), async_waiting=async_admission.waiting)
        quarantine.configure(on_quarantined=metrics.quarantined)
        registry.register()   # the host.* members, into the host bridge
        # Every chain run, whatever its mode or caller, opens these (the seam refuses to run without).
        invoke.probes.add("tracing", tracing.invocation_probe)
        invoke.probes.add("metrics", metrics.invocation_probe)
        # After each recorded chain run, in this order (pluggy's one call seam, for the hub).
        after_chain.add("quarantine", quarantine.observe_chain)
        after_chain.add("metering", metering.observe_chain)
        after_chain.add("latency", latency.observe_chain)
        after_chain.add("metrics", metrics.observe_chain)
        after_chain.add("plugin logs", log.store_logs)
        after_chain.add("recorded calls", recording.observe_chain)   # checks run versions against them
        after_chain.add("shadow", shadow.observe_chain)
        after_chain.add("tail", tail.observe_chain)   # last: the stream shows what the others recorded
        metrics.register()   # Celery's task signals
        task_queue.outbox.on_count = metrics.task_queued   # sent, spooled, resent, lost: /metrics
        checks.register(platform.check_allowed_hosts_setting, checks.Tags.security)
        post_delete.connect(delete_periodic_task, sender=CronJob, dispatch_uid="cron_job_periodic_task_cleanup")

"""Cron jobs: their beat schedules, each slot (overlap check, cronJobFiring, dispatch) and completion."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from celery.schedules import crontab as celery_crontab
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from plugins_app.errors import Conflict, InvalidInput, NotFound, PlatformError
from plugins_app.models import CronJob, CronRun
from plugins_app.runtime.tables.context import MAX_ID_LENGTH, is_platform_id
from plugins_app.services.execution.execute import execute_hook
from plugins_app.services.host import platform
from plugins_app.services.ids import get_in_account
from plugins_app.services.scheduling import task_queue

logger = logging.getLogger(__name__)

MAX_NAME_CHARS = 200
MAX_PROMPT_CHARS = 100_000
Status = CronRun.Status
FIELDS = ("agent_id", "name", "prompt", "kind", "cron_expression", "interval_seconds", "timezone", "enabled")
DEFAULTS = {"kind": CronJob.Kind.CRON_JOB, "cron_expression": "", "interval_seconds": None, "timezone": "UTC",
            "enabled": True}


# --- validation -------------------------------------------------------------------------------

def check_agent_id(value) -> str:
    if not is_platform_id(value):
        raise InvalidInput("agentId", f"expected the agent's id as a non-empty string of at most {MAX_ID_LENGTH} characters")
    return value


def check_schedule(cron_expression: str, interval_seconds, tz: str) -> None:
    """Exactly one of a five-field crontab (read in `tz`) or an interval in seconds."""
    if bool(cron_expression) == (interval_seconds is not None):
        raise InvalidInput("schedule", 'give either {"crontab": "m h dom mon dow"} or {"intervalSeconds": n}')
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):   # "Europe" is a directory
        raise InvalidInput("schedule.timezone", f"unknown time zone {tz!r}") from None
    if interval_seconds is not None:
        minimum = settings.HUB_SCHEDULING.cron_min_interval_seconds
        if isinstance(interval_seconds, bool) or not isinstance(interval_seconds, int) or interval_seconds < minimum:
            raise InvalidInput("schedule.intervalSeconds", f"expected an integer of at least {minimum}")
        return
    fields = cron_expression.split()
    if len(fields) != 5:
        raise InvalidInput("schedule.crontab", "expected five fields: minute hour day-of-month month day-of-week")
    minute, hour, day_of_month, month_of_year, day_of_week = fields
    try:
        celery_crontab(minute=minute, hour=hour, day_of_month=day_of_month,
                       month_of_year=month_of_year, day_of_week=day_of_week)
    except (ValueError, TypeError) as exc:
        raise InvalidInput("schedule.crontab", f"not a valid crontab: {exc}") from None


def _check_text(field: str, value, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, "must not be empty")
    if len(value) > limit:
        raise InvalidInput(field, f"over {limit} characters")
    return value


# --- jobs --------------------------------------------------------------------------------------

def get_job(account, job_id, field: str = "cronJobId") -> CronJob:
    return get_in_account(CronJob.objects.all(), account, job_id, field, f"cron job {job_id} not found")


@transaction.atomic
def create_job(account, **fields) -> CronJob:
    """Create a job from model field names (agent_id, name, prompt required) and schedule it."""
    job = CronJob(account=account)
    _apply(job, fields)
    job.save()
    sync_schedule(job)
    return job


@transaction.atomic
def update_job(account, job_id, **changes) -> CronJob:
    """Change some of a job's fields; a schedule change passes cron_expression and interval_seconds."""
    job = get_job(account, job_id)
    _apply(job, {**{name: getattr(job, name) for name in FIELDS}, **changes})
    job.save()
    sync_schedule(job)
    return job


def _apply(job: CronJob, values: dict) -> None:
    for name, value in clean_fields(values).items():
        setattr(job, name, value)


def clean_fields(values: dict) -> dict:
    """Check a job's fields (all of them, model names); returns them normalised. The admin's form uses it too."""
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise TypeError(f"not cron job fields: {', '.join(sorted(unknown))}")
    values = {**DEFAULTS, **values}
    check_agent_id(values.get("agent_id"))
    _check_text("name", values.get("name"), MAX_NAME_CHARS)
    _check_text("prompt", values.get("prompt"), MAX_PROMPT_CHARS)
    if values["kind"] not in CronJob.Kind.values:
        raise InvalidInput("kind", "expected " + " or ".join(CronJob.Kind.values))
    if not isinstance(values["enabled"], bool):
        raise InvalidInput("enabled", "expected true or false")
    values["cron_expression"] = " ".join((values["cron_expression"] or "").split())
    check_schedule(values["cron_expression"], values["interval_seconds"], values["timezone"])
    return values


@transaction.atomic
def delete_job(account, job_id) -> None:
    job = get_job(account, job_id)
    job.delete()   # models.scheduling's post_delete receiver removes its PeriodicTask


def sync_schedule(job: CronJob) -> PeriodicTask:
    """Create or update the job's PeriodicTask from its schedule and `enabled` (beat notices the save)."""
    task = job.periodic_task or PeriodicTask(name=f"cron job {job.pk}", task=task_queue.FIRE_CRON_SLOT)
    task.task = task_queue.FIRE_CRON_SLOT
    task.args = json.dumps([job.pk])
    task.description = f"{job.account}: {job.name}"
    task.enabled = job.enabled
    if job.interval_seconds:
        task.crontab = None
        task.interval = (IntervalSchedule.objects.filter(every=job.interval_seconds, period=IntervalSchedule.SECONDS)
                         .order_by("pk").first()
                         or IntervalSchedule.objects.create(every=job.interval_seconds, period=IntervalSchedule.SECONDS))
        # A slot a busy worker could not start within one interval is stale: the next one is due.
        task.expire_seconds = min(job.interval_seconds, settings.HUB_SCHEDULING.cron_slot_grace_seconds)
    else:
        minute, hour, day_of_month, month_of_year, day_of_week = job.cron_expression.split()
        fields = dict(minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month_of_year,
                      day_of_week=day_of_week, timezone=ZoneInfo(job.timezone))
        task.interval = None
        task.crontab = (CrontabSchedule.objects.filter(**fields).order_by("pk").first()
                        or CrontabSchedule.objects.create(**fields))
        task.expire_seconds = settings.HUB_SCHEDULING.cron_slot_grace_seconds
    task.save()
    if job.periodic_task_id != task.pk:
        job.periodic_task = task
        job.save(update_fields=["periodic_task"])
    return task


def runs(account, job_id, status: str | None = None):
    job = get_job(account, job_id)
    qs = CronRun.objects.filter(job=job)
    if status:
        if status not in Status.values:
            raise InvalidInput("status", "expected one of " + ", ".join(Status.values))
        qs = qs.filter(status=status)
    return qs.order_by("-slot_at", "-id")


def get_run(account, run_id, field: str = "cronRunId") -> CronRun:
    return get_in_account(CronRun.objects.select_related("job"), account, run_id, field,
                          f"cron run {run_id} not found")


# --- slots -------------------------------------------------------------------------------------

def run_now(account, job_id) -> CronRun:
    """Fire one slot of the job now (even when disabled), in the caller's process."""
    job = get_job(account, job_id)
    run = fire_slot(job.pk, trigger_key=f"manual-{uuid.uuid4().hex}", trigger=CronRun.Trigger.MANUAL)
    if run is None:   # deleted between the lookup and the slot: the same answer as an unknown id
        raise NotFound(f"cron job {job_id} was deleted")
    return run


# Two beats' messages for one interval tick are seconds apart at most; one beat's ticks are a whole
# interval apart (beat sends a tick once `interval` has passed since the last). A message sent within
# this share of an interval after the slot that last fired is taken for another beat's copy of it.
SAME_SLOT_SHARE = 0.9


def slot_key(job: CronJob, at: datetime) -> str:
    """The slot of `job` that beat sent at `at`. A crontab's slots are whole minutes (UTC), whichever beat
    sends them; an interval job's slot is the instant its message was sent, claimed with claim_interval_slot."""
    if job.interval_seconds:
        return f"slot:{job.pk}:{job.interval_seconds}s:{at.timestamp():.6f}"
    return f"slot:{job.pk}:{at.astimezone(UTC):%Y%m%dT%H%M}"


def claim_interval_slot(job: CronJob, at: datetime) -> bool:
    """Whether the interval slot beat sent at `at` is a new one, claiming it if so. Beats keep their own
    phase (each counts from its last tick), so no fixed grid of slots is right for both: two beats'
    copies of one tick fell on either side of a bucket boundary and fired twice. Instead a slot fires
    when none fired within SAME_SLOT_SHARE of an interval before it; the conditional UPDATE is the
    claim (one row, atomic on PostgreSQL and SQLite alike), and the message that claimed a slot claims
    it again when redelivered."""
    gap = timedelta(seconds=(job.interval_seconds or 0) * SAME_SLOT_SHARE)
    return bool(CronJob.objects.filter(pk=job.pk).filter(
        Q(slot_claimed_at__isnull=True) | Q(slot_claimed_at__lte=at - gap) | Q(slot_claimed_at=at)
    ).update(slot_claimed_at=at))


def fire_scheduled_slot(job_id: int, slot_at: str | None) -> CronRun | None:
    """Beat's slot (`slot_at`: when beat sent it, ISO; None from a beat without SlotScheduler: now).
    The slot is claimed before anything runs (a crontab's by its run row, unique per job and minute; an
    interval job's by claim_interval_slot, then its row): two beats, or a redelivered message, sending
    one slot fire it once (issue 40, item 9)."""
    job = CronJob.objects.filter(pk=job_id).first()
    if job is None:
        logger.info("slot for cron job %s ignored: the job no longer exists", job_id)
        return None
    at = datetime.fromisoformat(slot_at) if slot_at else timezone.now()
    key = slot_key(job, at)
    if job.interval_seconds and not CronRun.objects.filter(trigger_key=key).exists() \
            and not claim_interval_slot(job, at):
        logger.info("cron job %s: the slot sent at %s fired already (another beat sent it)", job_id, at.isoformat())
        return None
    return fire_slot(job_id, trigger_key=key)


def fire_slot(job_id: int, *, trigger_key: str, trigger: str = CronRun.Trigger.SCHEDULE) -> CronRun | None:
    """One slot: the overlap check, then cronJobFiring, then (unless cancelled) the mission's dispatch.
    `trigger_key` identifies the slot, so a redelivered slot task finds its run instead of firing twice."""
    job = CronJob.objects.select_related("account").filter(pk=job_id).first()
    if job is None:
        logger.info("slot for cron job %s ignored: the job no longer exists", job_id)
        return None
    existing = CronRun.objects.filter(trigger_key=trigger_key).first()
    if existing is not None:
        # The same slot again (a redelivered message): resume only a run interrupted mid-hook.
        return _fire(job, existing) if existing.status == Status.FIRING else existing
    if trigger == CronRun.Trigger.SCHEDULE and not job.enabled:
        return None
    now = timezone.now()
    _expire_stale_runs(job, now)
    try:
        with transaction.atomic():
            run = CronRun.objects.create(account=job.account, job=job, trigger_key=trigger_key, trigger=trigger,
                                         status=Status.FIRING, slot_at=now)
    except IntegrityError:
        # Either this slot raced itself (same key) or the job has an active run (the partial index).
        existing = CronRun.objects.filter(trigger_key=trigger_key).first()
        if existing is not None:
            return existing
        active = CronRun.objects.filter(job=job, status__in=CronRun.ACTIVE).first()
        reason = (f"overlaps run {active.pk}, which is still {active.get_status_display().lower()}"
                  if active else "overlaps a run that was still active")
        return CronRun.objects.create(account=job.account, job=job, trigger_key=trigger_key, trigger=trigger,
                                      status=Status.SKIPPED, reason=reason, slot_at=now, finished_at=now)
    return _fire(job, run)


def _fire(job: CronJob, run: CronRun) -> CronRun:
    context = {"cronJobId": str(job.pk), "agentId": job.agent_id, "kind": job.kind, "name": job.name,
               "prompt": job.prompt}
    try:
        result, _ = execute_hook(job.account, "cronJobFiring", context, origin="cron")
    except Exception as exc:
        # The engine itself failed (not a plugin: plugins fail open). Free the job for its next slot.
        _finish(run.pk, Status.FIRING, Status.DISPATCH_FAILED, reason=f"cronJobFiring could not run: {exc}"[:500])
        raise
    if result.cancellation is not None:
        _finish(run.pk, Status.FIRING, Status.CANCELLED, reason=result.cancellation.reason[:500],
                cancelled_by=result.cancellation.plugin, prompt=job.prompt)
    else:
        with transaction.atomic():
            moved = CronRun.objects.filter(pk=run.pk, status=Status.FIRING).update(
                status=Status.DISPATCHING, prompt=result.context["prompt"])
            if moved:
                transaction.on_commit(lambda: task_queue.enqueue(task_queue.DISPATCH_MISSION, run.pk))
    run.refresh_from_db()
    return run


def _finish(run_id: int, from_status: str, to_status: str, **fields) -> bool:
    return bool(CronRun.objects.filter(pk=run_id, status=from_status).update(
        status=to_status, finished_at=timezone.now(), **fields))


def _expire_stale_runs(job: CronJob, now) -> None:
    """A run the platform never closed must not hold the job forever."""
    cutoff = now - timedelta(seconds=settings.HUB_SCHEDULING.cron_run_expiry_seconds)
    expired = CronRun.objects.filter(job=job, status__in=CronRun.ACTIVE, slot_at__lt=cutoff).update(
        status=Status.EXPIRED, finished_at=now,
        reason=f"no completion heard within {settings.HUB_SCHEDULING.cron_run_expiry_seconds} s")
    if expired:
        logger.warning("cron job %s: %d stale run(s) expired", job.pk, expired)


# --- dispatch and completion ---------------------------------------------------------------------

def mission_payload(run: CronRun) -> dict:
    job = run.job
    return {"cronJobId": str(job.pk), "cronJobRunId": str(run.pk), "agentId": job.agent_id, "kind": job.kind,
            "name": job.name, "prompt": run.prompt}


def dispatch(run_id: int) -> CronRun | None:
    """Hand a mission to the platform; a temporary failure raises PlatformError for the task to retry.
    The platform may see one mission twice if its answer was lost: cronJobRunId identifies it."""
    run = CronRun.objects.select_related("job", "account").filter(pk=run_id).first()
    if run is None or run.status != Status.DISPATCHING:
        return run
    try:
        answer = platform.call(run.account, "/missions", mission_payload(run))
    except PlatformError as exc:
        if exc.retryable:
            raise
        dispatch_failed(run_id, str(exc))
        return run
    # The mission's session, if the platform says; otherwise the complete call must name it.
    session_id = answer.get("sessionId")
    CronRun.objects.filter(pk=run_id, status=Status.DISPATCHING).update(
        status=Status.RUNNING, dispatched_at=timezone.now(), session_id=session_id if is_platform_id(session_id) else "")
    run.refresh_from_db()
    return run


def dispatch_failed(run_id: int, reason: str) -> None:
    if _finish(run_id, Status.DISPATCHING, Status.DISPATCH_FAILED, reason=f"not dispatched: {reason}"[:500]):
        logger.warning("cron run %s could not be dispatched: %s", run_id, reason)


def complete_run(account, run_id, status, session_id=None) -> CronRun:
    """The platform closes a run it started; cronJobCompleted then fires once, from a task."""
    if status not in CronRun.CLOSING:
        raise InvalidInput("status", "expected one of " + ", ".join(CronRun.CLOSING))
    if session_id is not None and not is_platform_id(session_id):
        raise InvalidInput("sessionId", f"expected a non-empty id string of at most {MAX_ID_LENGTH} characters")
    run = get_run(account, run_id)
    session_id = session_id or run.session_id
    if run.status in (Status.DISPATCHING, Status.RUNNING) and not session_id:
        raise InvalidInput("sessionId", "the run's session is unknown: send the mission's sessionId")
    now = timezone.now()
    with transaction.atomic():
        # DISPATCHING too: a quick mission can close before the platform's answer to /missions reaches us.
        closed = CronRun.objects.filter(pk=run.pk, status__in=(Status.DISPATCHING, Status.RUNNING)).update(
            status=status, finished_at=now, session_id=session_id)
        if not closed:
            run.refresh_from_db()
            raise Conflict(f"cron run {run.pk} is already closed ({run.status})", status=run.status)
        CronRun.objects.filter(pk=run.pk, dispatched_at__isnull=True).update(dispatched_at=now)
        transaction.on_commit(lambda: task_queue.enqueue(task_queue.FIRE_CRON_COMPLETED, run.pk))
    run.refresh_from_db()
    return run


def fire_completed(run_id: int) -> bool:
    """Fire cronJobCompleted for a closed run, at most once: the claim is taken before the hook runs."""
    claimed = CronRun.objects.filter(pk=run_id, status__in=CronRun.CLOSING, completed_hook_at__isnull=True).update(
        completed_hook_at=timezone.now())
    if not claimed:
        return False
    run = CronRun.objects.select_related("job", "account").get(pk=run_id)
    execute_hook(run.account, "cronJobCompleted", {
        "cronJobId": str(run.job_id), "cronJobRunId": str(run.pk), "sessionId": run.session_id,
        "agentId": run.job.agent_id, "status": run.status}, origin="cron")
    return True

"""Liveness and readiness: is the database reachable, do the engines answer, is the broker there."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.db import connection

from plugins_app.services.engine.tier import get_tier

BROKER_TIMEOUT_SECONDS = 2   # whole seconds: kombu's ensure_connection documents an int timeout


@dataclass
class Check:
    ok: bool
    ms: float
    error: str | None = None
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"ok": self.ok, "ms": round(self.ms, 2), "error": self.error, **self.details}


def _timed(probe) -> Check:
    started = time.perf_counter()
    try:
        details = probe() or {}
    except Exception as exc:   # any failure is the answer: not ready, and why
        return Check(False, (time.perf_counter() - started) * 1000, f"{type(exc).__name__}: {exc}"[:300])
    return Check(True, (time.perf_counter() - started) * 1000, details=details)


def database() -> dict:
    # A table only migrations create: an empty database made on the spot by SQLite is not ready either.
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM django_migrations LIMIT 1")
        if cursor.fetchone() is None:
            raise RuntimeError("the database has no applied migrations")
    return {}


def engines() -> dict:
    tier = get_tier()
    answers: list[dict] = []
    for address in tier.addresses:
        reply = tier.ping(address)
        if not reply.get("pong"):
            raise RuntimeError(f"engine {len(answers)} answered {reply!r}"[:200])
        answers.append({"queued": reply.get("queued", 0), "isolatesReplaced": reply.get("replaced", 0)})
    return {"engines": answers}


def broker() -> dict:
    from middleware_hub.celery import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=BROKER_TIMEOUT_SECONDS)
        return {"transport": str(conn.transport_cls)}


CHECKS = {"database": database, "engines": engines, "broker": broker}


def readiness() -> tuple[bool, dict]:
    """Runs every check (one failing does not hide the others); ready when all pass."""
    results = {name: _timed(probe) for name, probe in CHECKS.items()}
    return all(c.ok for c in results.values()), {name: c.as_dict() for name, c in results.items()}

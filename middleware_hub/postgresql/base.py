"""Django's PostgreSQL backend with a deadline on every round trip (middleware_hub/query_deadline.py):
the statements (through an execute wrapper), COMMIT and ROLLBACK (which Django sends past the
wrappers), and the health check made before a kept connection is reused."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from django.conf import settings
from django.db.backends.postgresql import base
from django.db.backends.postgresql.operations import DatabaseOperations as BaseOperations

from middleware_hub import query_deadline
from middleware_hub.query_deadline import watchdog

PREPARE_AFTER_RUNS = 2


class DatabaseOperations(BaseOperations):
    def last_executed_query(self, cursor: Any, sql: str, params: Any) -> str:
        # A prepared_cursor()'s query holds the server's $n placeholders: logged with its values, as
        # Django's own cursors' are.
        if isinstance(cursor, base.ServerBindingCursor):
            try:
                return str(self.compose_sql(sql, params))
            except Exception:   # noqa: BLE001 - a value that can't be shown costs the log line, not the query
                return sql
        return super().last_executed_query(cursor, sql, params)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.execute_wrappers.append(self._statement_within_deadline)

    def prepared_cursor(self) -> Any:
        """A cursor whose parameters the server binds, so a statement run often on this connection is
        prepared once (from its PREPARE_AFTER_RUNS-th run) and then only executed: for the hot
        statements of a call's path (host.kv's), where parsing and planning cost as much as running.
        Django's own cursors bind on the client, which never prepares."""
        self.close_if_health_check_failed()
        self.ensure_connection()
        with self.wrap_database_errors:
            # Both untyped in django-stubs as used here (its ServerBindingCursor is psycopg2-shaped).
            cursor = base.ServerBindingCursor(self.connection)  # type: ignore[call-arg]
            return self._prepare_cursor(cursor)  # type: ignore[attr-defined]

    def _watched(self, what: str, statements: int = 1) -> AbstractContextManager[None]:
        config = settings.HUB_DATABASE
        seconds = query_deadline.seconds(config.query_deadline_seconds)
        if seconds > 0 and statements > 1:
            # One round trip, but the server runs its statements in turn, each within its own statement
            # timeout (a row lock waited for, a deadlock found): a live server's answer may take that
            # long for each, and cutting it would take the database for hung and refuse every request
            # of the process for a moment (issue 40's admins' writers: execute calls answered 503
            # while two processes' usage flushes waited on each other's rows).
            seconds += (statements - 1) * (config.statement_timeout_seconds or config.query_deadline_seconds)
        try:
            fd = self.connection.fileno()
        except Exception:   # noqa: BLE001 - a broken connection: the round trip fails by itself, as Django wraps it
            fd = -1
        if seconds <= 0 or fd < 0:
            return contextlib.nullcontext()
        return watchdog.watch(fd, seconds, config.hung_breaker_seconds, what)

    def _statement_within_deadline(self, execute: Callable[..., Any], sql: str, params: Any, many: bool,
                                   context: dict[str, Any]) -> Any:
        if not many:
            with self._watched("a statement"):
                return execute(sql, params, many, context)
        params = list(params)   # Django takes any iterable of parameter rows; counted here, so a list
        with self._watched(f"{len(params)} statements", statements=len(params)):
            return execute(sql, params, many, context)

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        # A connection's own wait is bounded by its connect_timeout; a hung database is not asked
        # again while it is taken to be hung, and one that let the timeout pass is taken to be hung.
        watchdog.refuse_if_hung("a new connection")
        started = time.monotonic()
        try:
            conn = super().get_new_connection(conn_params)
        except Exception:
            if time.monotonic() - started >= settings.HUB_DATABASE.connect_timeout_seconds * 0.9:
                watchdog.hung(settings.HUB_DATABASE.hung_breaker_seconds)
            raise
        if "prepare_threshold" not in self.settings_dict["OPTIONS"]:
            # Only prepared_cursor()'s statements are ever prepared (Django's cursors bind on the
            # client). A deployment behind a pooler that can't keep them sets OPTIONS' own.
            conn.prepare_threshold = PREPARE_AFTER_RUNS
        return conn

    def init_connection_state(self) -> None:
        # Setting the connection up may take round trips of its own (its time zone, its role).
        with self._watched("setting up a connection"):
            super().init_connection_state()

    def _commit(self) -> None:
        if self.connection is not None:
            with self._watched("COMMIT"):
                super()._commit()  # type: ignore[misc]  # BaseDatabaseWrapper's, untyped in django-stubs

    def _rollback(self) -> None:
        if self.connection is not None:
            with self._watched("ROLLBACK"):
                super()._rollback()  # type: ignore[misc]  # as above

    def is_usable(self) -> bool:
        if self.connection is None:
            return False
        try:
            with self._watched("the health check"):
                return super().is_usable()
        except query_deadline.DatabaseHung:
            return False

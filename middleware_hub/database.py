"""The database's timeouts (DATABASE_*_TIMEOUT_*), read once at start: a hung or locked database answers
the API's JSON 503 within seconds instead of holding every request for as long as it hangs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plugins_app.runtime.environment import Env

POSTGRESQL = "django.db.backends.postgresql"
SQLITE = "django.db.backends.sqlite3"
DEADLINED_POSTGRESQL = "middleware_hub.postgresql"


@dataclass(frozen=True)
class DatabaseConfig:
    connect_timeout_seconds: int = 2      # PostgreSQL: a new connection gives up after this (libpq's minimum is 2)
    statement_timeout_seconds: float = 5.0   # PostgreSQL: any one statement is cancelled after this (0: never)
    lock_timeout_seconds: float = 2.0     # PostgreSQL: a statement waiting this long for a lock fails (0: never)
    sqlite_timeout_seconds: float = 5.0   # SQLite: how long a connection waits for another's write lock
    # PostgreSQL, on the hub's side (query_deadline.py): a round trip unanswered after this is cut off,
    # for a server that hangs and so enforces none of the above (0: never). Above the statement timeout.
    query_deadline_seconds: float = 7.0
    execute_deadline_seconds: float = 2.5   # ...on the execute path, whose statements are all short
    hung_breaker_seconds: float = 1.0      # after a cut-off, round trips fail at once for this long
    # PostgreSQL: the hub's hot statements (host.kv's) are prepared on each connection; off behind a
    # pooler in transaction mode, which cannot keep a prepared statement on the session that made it.
    prepared_statements: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> DatabaseConfig:
        env = Env(environ)
        statement = env.number("DATABASE_STATEMENT_TIMEOUT_SECONDS", 5.0)
        return cls(connect_timeout_seconds=env.integer("DATABASE_CONNECT_TIMEOUT_SECONDS", 2, minimum=1),
                   statement_timeout_seconds=statement,
                   lock_timeout_seconds=env.number("DATABASE_LOCK_TIMEOUT_SECONDS", 2.0),
                   sqlite_timeout_seconds=env.number("DATABASE_SQLITE_TIMEOUT_SECONDS", 5.0),
                   query_deadline_seconds=env.number("DATABASE_QUERY_DEADLINE_SECONDS",
                                                     statement + 2.0 if statement > 0 else 0.0),
                   execute_deadline_seconds=env.number("DATABASE_EXECUTE_DEADLINE_SECONDS", 2.5),
                   hung_breaker_seconds=env.number("DATABASE_HUNG_BREAKER_SECONDS", 1.0),
                   prepared_statements=env.flag("DATABASE_PREPARED_STATEMENTS", True))

    @staticmethod
    def engine(engine: str) -> str:
        """The backend the hub runs for `engine`: PostgreSQL's with the round-trip deadline."""
        return DEADLINED_POSTGRESQL if engine == POSTGRESQL else engine

    def options(self, engine: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """A database's OPTIONS (settings.DATABASES) with these timeouts; options the URL itself gave
        (`?connect_timeout=10`, `?options=-c ...`) come last, so they win."""
        options = dict(given)
        if engine == POSTGRESQL:
            server = (f"-c statement_timeout={round(self.statement_timeout_seconds * 1000)} "
                      f"-c lock_timeout={round(self.lock_timeout_seconds * 1000)}")
            options["options"] = f"{server} {options['options']}" if options.get("options") else server
            options.setdefault("connect_timeout", self.connect_timeout_seconds)
            if not self.prepared_statements:
                options["prepare_threshold"] = None   # psycopg's "never"; the backend then leaves it so
        elif engine == SQLITE:
            options.setdefault("timeout", self.sqlite_timeout_seconds)
        return options

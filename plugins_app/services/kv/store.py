"""An installation's host.kv store in the hub's database: reads skip expired keys, each write is one
statement, and incr adds in the database so every engine, process and machine counts together."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, Q, Sum
from django.utils import timezone

from plugins_app.models import KvEntry
from plugins_app.services.kv.checks import COUNTER_BYTES, Encoded, KvError, decoded

QUOTA_EXCEEDED = "kv quota exceeded"


@dataclass(frozen=True)
class Namespace:
    """One installation's keys (the account is kept beside them for its quota)."""

    account_id: int
    installation_id: int


def _live(now: datetime.datetime) -> Q:
    return Q(expires_at__isnull=True) | Q(expires_at__gt=now)


def entries(ns: Namespace):
    return KvEntry.objects.filter(installation_id=ns.installation_id)


def get(ns: Namespace, key: str) -> Any:
    # One statement written out: the ORM's query building cost more than the query (a read is on the
    # path of every call of a plugin that checks its state).
    with _cursor() as cursor:
        cursor.execute(f"SELECT value, number FROM {_table()} WHERE installation_id = %s AND {_q('key')} = %s"
                       " AND (expires_at IS NULL OR expires_at > %s)",
                       [ns.installation_id, key, _at(timezone.now())])
        row = cursor.fetchone()
    return decoded(*row) if row else None


def delete(ns: Namespace, key: str) -> bool:
    with _cursor() as cursor:
        _write(cursor, f"DELETE FROM {_table()} WHERE installation_id = %s AND {_q('key')} = %s",
               [ns.installation_id, key])
        return cursor.rowcount > 0


def list_keys(ns: Namespace, prefix: str, limit: int, cursor: str) -> dict:
    """{keys: [{key, size, expiresAt}], cursor}: keys after `cursor` in order; cursor null on the last page."""
    rows = entries(ns).filter(_live(timezone.now()))
    if prefix:
        rows = rows.filter(key__startswith=prefix)
    if cursor:
        rows = rows.filter(key__gt=cursor)
    page = list(rows.order_by("key").values_list("key", "size", "expires_at")[:limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return {"keys": [{"key": k, "size": s, "expiresAt": iso(e)} for k, s, e in page],
            "cursor": page[-1][0] if more else None}


def iso(at: datetime.datetime | None) -> str | None:
    return at.isoformat().replace("+00:00", "Z") if at else None


def _expiry(now: datetime.datetime, ttl: float | None) -> datetime.datetime | None:
    return now + datetime.timedelta(seconds=ttl) if ttl is not None else None


def check_quota(ns: Namespace, key: str, size: int, now: datetime.datetime) -> None:
    """Refuses a write that would take the account past its keys or bytes (other keys as they stand, this
    key at its new size). Checked before the write, not in it: writers racing at the edge can pass it
    by a few keys, which a quota (unlike a counter) can afford."""
    others = (KvEntry.objects.filter(_live(now), account_id=ns.account_id)
              .exclude(installation_id=ns.installation_id, key=key)
              .aggregate(keys=Count("id"), size=Sum("size")))
    if others["keys"] + 1 > settings.HUB_KV.max_keys or (others["size"] or 0) + size > settings.HUB_KV.max_bytes:
        raise KvError(QUOTA_EXCEEDED)


def _cursor() -> Any:
    """A cursor for the store's own statements: on PostgreSQL one that prepares them (the hub's backend
    offers it), as they run on the path of every call of a plugin that keeps state."""
    prepared = getattr(connection, "prepared_cursor", None)
    return prepared() if prepared is not None else connection.cursor()


def _table() -> str:
    return connection.ops.quote_name(KvEntry._meta.db_table)


def _at(value: datetime.datetime | None) -> Any:
    return connection.ops.adapt_datetimefield_value(value)


def put(ns: Namespace, key: str, encoded: Encoded, ttl: float | None) -> None:
    now = timezone.now()
    size = len(key.encode("utf-8", "surrogatepass")) + encoded.size
    check_quota(ns, key, size, now)
    t = _table()
    with _cursor() as cursor:
        _write(
            cursor,
            f"INSERT INTO {t} (account_id, installation_id, {_q('key')}, value, number, size, expires_at, updated_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (installation_id, " + _q("key") + ") DO UPDATE SET"
            " value = excluded.value, number = excluded.number, size = excluded.size,"
            " expires_at = excluded.expires_at, updated_at = excluded.updated_at",
            [ns.account_id, ns.installation_id, key, encoded.text, encoded.number, size, _at(_expiry(now, ttl)),
             _at(now)])


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


# A plugin's kv write on PostgreSQL, unless HUB_KV_DURABLE_WRITES: its statement turns synchronous_commit
# off for its own transaction, so the commit does not wait for the WAL to reach the disk (1 ms and more
# of a rate-limit call's few). Done inside the one statement, not as SET LOCAL in a transaction of its
# own, which would cost three more round trips. The CTE is read by RETURNING, so it runs whenever a
# row is written, before the commit; a write that changes no row commits nothing to wait for.
_RELAXED = "WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true) AS durability) "
_DURABILITY = "(SELECT durability FROM relaxed)"


def relaxed() -> bool:
    """Whether the next kv write may commit without waiting for the disk. Only when the statement is its
    own transaction: inside a caller's (an admin's change logged beside it, a test's), set_config would
    relax that whole transaction, the rows written beside the kv write included."""
    return (not settings.HUB_KV.durable_writes and connection.vendor == "postgresql"
            and not connection.in_atomic_block and connection.get_autocommit())


def _write(cursor: Any, sql: str, params: list, returning: str = "") -> tuple | None:
    """Runs one kv write (`sql` without its RETURNING clause), relaxed as `relaxed()` says; the row of
    `returning`'s columns, when asked for."""
    if relaxed():
        sql = _RELAXED + sql
        returning = f"{returning}, {_DURABILITY}" if returning else _DURABILITY
    if not returning:
        cursor.execute(sql, params)
        return None
    cursor.execute(f"{sql} RETURNING {returning}", params)
    return cursor.fetchone()


def incr(ns: Namespace, key: str, by: int, ttl: float | None, maximum: int | None) -> int | dict:
    """The counter after adding `by`, or {ok: False, value} when that would pass `maximum` (nothing changed).
    An existing live counter is added to by one UPDATE; otherwise (a new or expired key) one upsert,
    so a counter created at the same moment by another caller is added to, never overwritten."""
    now = timezone.now()
    bound = " AND number + %s <= %s" if maximum is not None else ""
    with _cursor() as cursor:
        row = _write(
            cursor,
            f"UPDATE {_table()} SET number = number + %s, updated_at = %s WHERE installation_id = %s"
            f" AND {_q('key')} = %s AND number IS NOT NULL AND (expires_at IS NULL OR expires_at > %s){bound}",
            [by, _at(now), ns.installation_id, key, _at(now)] + ([by, maximum] if maximum is not None else []),
            "number")
    if row is not None:
        return row[0]
    return _incr_new(ns, key, by, ttl, maximum, now)


def _incr_new(ns: Namespace, key: str, by: int, ttl: float | None, maximum: int | None,
              now: datetime.datetime) -> int | dict:
    current = entries(ns).filter(_live(now), key=key).values_list("value", "number").first()
    if current is not None and current[1] is None:
        raise KvError("the key holds a value that is not an integer counter")
    if current is None and maximum is not None and by > maximum:
        return {"ok": False, "value": 0}
    size = len(key.encode("utf-8", "surrogatepass")) + COUNTER_BYTES
    if current is None:
        check_quota(ns, key, size, now)
    t, live = _table(), f"({_table()}.expires_at IS NULL OR {_table()}.expires_at > %s)"
    bound = f" AND (CASE WHEN {live} THEN {t}.number ELSE 0 END) + excluded.number <= %s" if maximum is not None else ""
    with _cursor() as cursor:
        row = _write(
            cursor,
            f"INSERT INTO {t} (account_id, installation_id, {_q('key')}, value, number, size, expires_at, updated_at)"
            f" VALUES (%s, %s, %s, NULL, %s, %s, %s, %s) ON CONFLICT (installation_id, {_q('key')}) DO UPDATE SET"
            f" number = CASE WHEN {live} THEN {t}.number + excluded.number ELSE excluded.number END,"
            f" expires_at = CASE WHEN {live} THEN {t}.expires_at ELSE excluded.expires_at END,"
            f" value = NULL, size = excluded.size, updated_at = excluded.updated_at"
            f" WHERE (NOT {live} OR {t}.number IS NOT NULL){bound}",
            [ns.account_id, ns.installation_id, key, by, size, _at(_expiry(now, ttl)), _at(now),
             _at(now), _at(now), _at(now)] + ([_at(now), maximum] if maximum is not None else []),
            "number")
    if row is not None:
        return row[0]
    # Refused in the statement: another caller made the key meanwhile (a value, or a counter at the bound).
    current = entries(ns).filter(_live(now), key=key).values_list("value", "number").first()
    if current is not None and current[1] is None:
        raise KvError("the key holds a value that is not an integer counter")
    return {"ok": False, "value": current[1] if current else 0}


def clear(ns: Namespace) -> int:
    deleted, _ = entries(ns).delete()
    return deleted


def sweep(now: datetime.datetime | None = None) -> int:
    """Deletes every expired key (beat's periodic task); reads skip them before this runs."""
    deleted, _ = KvEntry.objects.filter(expires_at__lte=now or timezone.now()).delete()
    return deleted

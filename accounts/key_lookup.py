"""An API key and its account, found for each call in one statement that is written once.

Every API call looks its key up (its account's `hooks_version` with it: the chain cache's staleness
marker, so it is read fresh each time and never cached here). Through the ORM, compiling that
select_related query cost a sixth of a web worker's CPU under bench/io.py's load, more than running
it. Here the SQL is built once per database from the models' own fields, each value goes through the
converters the ORM would apply (SQLite's datetimes are text), and the instances are made with
`from_db`, as a queryset makes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import connections

if TYPE_CHECKING:
    from .models import ApiKey


class KeyLookup:
    def __init__(self) -> None:
        self._plans: dict[str, _Plan] = {}   # database alias -> its statement and converters

    def active_key(self, prefix: str, using: str = "default") -> ApiKey | None:
        """The unrevoked key with `prefix`, its account loaded; None if there is none."""
        plan = self._plans.get(using)
        if plan is None:
            plan = self._plans[using] = _Plan(using)
        with connections[using].cursor() as cursor:
            cursor.execute(plan.sql, [prefix])
            row = cursor.fetchone()
        return None if row is None else plan.instances(row)


class _Plan:
    """The statement, and how a row of it becomes an ApiKey with its Account."""

    def __init__(self, using: str) -> None:
        from .models import Account, ApiKey

        connection = connections[using]

        def quote(name: str | None) -> str:   # a concrete field always has its column (None: only in the stubs)
            assert name is not None
            return str(connection.ops.quote_name(name))

        self.using = using
        self.key_fields = list(ApiKey._meta.concrete_fields)
        self.account_fields = list(Account._meta.concrete_fields)
        key_table, account_table = quote(ApiKey._meta.db_table), quote(Account._meta.db_table)
        columns = ([f"{key_table}.{quote(f.column)}" for f in self.key_fields]
                   + [f"{account_table}.{quote(f.column)}" for f in self.account_fields])
        account_fk = quote(ApiKey._meta.get_field("account").column)
        prefix, revoked = quote(ApiKey._meta.get_field("prefix").column), quote(ApiKey._meta.get_field("revoked_at").column)
        self.sql = (f"SELECT {', '.join(columns)} FROM {key_table} INNER JOIN {account_table}"
                    f" ON {account_table}.{quote(Account._meta.pk.column)} = {key_table}.{account_fk}"
                    f" WHERE {key_table}.{prefix} = %s AND {key_table}.{revoked} IS NULL")
        self.converters = [self._converters(connection, model._meta.db_table, field)
                           for model, fields in ((ApiKey, self.key_fields), (Account, self.account_fields))
                           for field in fields]
        self.ApiKey, self.Account = ApiKey, Account

    @staticmethod
    def _converters(connection: Any, table: str, field: Any) -> list[tuple[Any, Any]]:
        expression = field.get_col(table)
        return [(convert, expression) for convert in
                connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)]

    def instances(self, row: tuple) -> ApiKey:
        connection = connections[self.using]
        values = list(row)
        for i, converters in enumerate(self.converters):
            for convert, expression in converters:
                values[i] = convert(values[i], expression, connection)
        split = len(self.key_fields)
        account = self.Account.from_db(self.using, [f.attname for f in self.account_fields], values[split:])
        api_key = self.ApiKey.from_db(self.using, [f.attname for f in self.key_fields], values[:split])
        api_key.account = account
        return api_key


lookup = KeyLookup()

"""The one check for the hub's database ids (ASCII decimal strings within a signed 64-bit range),
and the one lookup of an account's object by such an id."""

from typing import TypeVar

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model, QuerySet

from plugins_app.errors import InvalidInput, NotFound

M = TypeVar("M", bound=Model)

# PostgreSQL's bigint and SQLite's INTEGER are both signed 64-bit.
MAX_ID = 2 ** 63 - 1
_MAX_DIGITS = len(str(MAX_ID))


def parse_id(value, field: str) -> int:
    """The id `value` names, or InvalidInput naming `field`; whether it exists is the caller's 404.
    An int is the hub's own code passing a primary key."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ID:
        return value
    if isinstance(value, str) and 0 < len(value) <= _MAX_DIGITS and value.isascii() and value.isdigit():
        number = int(value)
        if number <= MAX_ID:
            return number
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise InvalidInput(field, "ids are strings (64-bit numbers do not survive JSON numbers)")
    raise InvalidInput(field, f"expected an id: decimal digits, at most {MAX_ID}")


def get_in_account(queryset: QuerySet[M], account, object_id, field: str, missing: str) -> M:
    """The account's object `object_id` (checked as `field`) from `queryset`, or NotFound(`missing`):
    another account's id answers exactly like one that does not exist."""
    try:
        return queryset.get(pk=parse_id(object_id, field), account=account)
    except ObjectDoesNotExist:   # the queryset's model's DoesNotExist
        raise NotFound(missing) from None

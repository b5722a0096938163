"""The one check for the hub's database ids: ASCII decimal strings within a signed 64-bit range."""

from plugins_app.errors import InvalidInput

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

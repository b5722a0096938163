"""Times as the CLI prints them: the reader's local time, always with its UTC offset."""

from __future__ import annotations

from datetime import datetime


def _offset(moment: datetime) -> str:
    text = moment.strftime("%z")   # +0100; written +01:00 as ISO 8601 and the hub's API write it
    return f"{text[:3]}:{text[3:]}"


def clock_time(epoch_seconds: float) -> str:
    """A tail line's time of day, e.g. 18:42:07+01:00."""
    moment = datetime.fromtimestamp(epoch_seconds).astimezone()
    return moment.strftime("%H:%M:%S") + _offset(moment)


def date_time(iso: str) -> str:
    """An API timestamp (ISO 8601, any zone) in local time, e.g. 2026-12-05 18:42:07+01:00."""
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S") + _offset(moment)

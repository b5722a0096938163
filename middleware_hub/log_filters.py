"""Logging filters that keep the dev and worker logs for what a person needs to read."""

import logging

from django.conf import settings

# The notification sweep runs every few seconds; its "sent", "received" and "succeeded" lines say
# nothing while it works (a failing sweep still logs its error).
ROUTINE_TASKS = ("deliver_due_notifications", "deliver-due-notifications")
# kombu says this on every connection to the file-system broker, which has no host at all.
NOISE = ("No hostname was supplied",)


class QuietRoutine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        message = record.getMessage()
        if record.levelno <= logging.INFO and any(name in message for name in ROUTINE_TASKS):
            return False
        return not any(text in message for text in NOISE)


class ClientErrorsWithoutTraceback(logging.Filter):
    """A 4xx (a refused permission, a missing page) is the client's business: one line, no traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if status is not None and status < 500:
            record.exc_info = None
            record.exc_text = None
        return True


class OneLinePerRequest(logging.Filter):
    """The development server's access lines (django.server) without the two kinds a person skips:
    a refused or failed request, which django.request has already logged with its reason (so it
    would show twice), and a static file served (a page load fetches about eight)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "django.server":
            return True
        status = getattr(record, "status_code", None)
        if status is not None and status >= 400:
            return False
        return not _path_of(record).startswith(_static_prefix())


def _path_of(record: logging.LogRecord) -> str:
    """The path of an access line's request line ('GET /static/x.css HTTP/1.1')."""
    args = record.args if isinstance(record.args, tuple) else ()
    parts = str(args[0]).split(" ") if args else []
    return parts[1] if len(parts) > 1 else ""


def _static_prefix() -> str:
    return "/" + settings.STATIC_URL.lstrip("/")


class OutageAnswersOnce(logging.Filter):
    """Django logs every 5xx answer; a 503 is an outage the API's exception handler logs itself, once
    per few seconds (a database outage at hundreds of calls a second would flood the log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == "django.request" and getattr(record, "status_code", None) == 503)


def install_on(logger: logging.Logger) -> None:
    """Celery replaces the root logger's handlers with its own: give those handlers the filters too."""
    for handler in logger.handlers:
        if not any(isinstance(f, QuietRoutine) for f in handler.filters):
            handler.addFilter(QuietRoutine())
            handler.addFilter(ClientErrorsWithoutTraceback())

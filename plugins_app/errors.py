"""The hub's typed errors; the API's exception handler turns each into one JSON answer."""

from typing import Any

from rest_framework import status
from rest_framework.exceptions import APIException

from plugins_app.runtime.tables.hooks import HOOK_NAMES


class HubError(APIException):
    status_code: int = status.HTTP_400_BAD_REQUEST
    default_code = "bad_request"
    default_detail = "The request could not be processed."

    def __init__(self, detail: Any = None, code: str | None = None, **extra: Any) -> None:
        super().__init__(detail, code)
        self.extra = extra


class InvalidInput(HubError):
    default_code = "invalid"

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}", field=field)


class UnknownHook(HubError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "unknown_hook"

    def __init__(self, name: str):
        super().__init__(f"unknown hook {name!r}; the hooks are: {', '.join(HOOK_NAMES)}",
                         hooks=list(HOOK_NAMES))


class NotFound(HubError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "not_found"


class Conflict(HubError):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class PayloadTooLarge(HubError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"


class TooManyRequests(HubError):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "too_many_requests"


class CompileFailed(HubError):
    default_code = "compile_error"

    def __init__(self, errors: list[dict]):
        first = errors[0]
        super().__init__(
            f"the plugin does not compile: line {first['line']}, column {first['column']}: {first['message']}",
            errors=errors)


class TypeCheckFailed(CompileFailed):
    """The source transpiles but does not type-check against the SDK (asked for with "typecheck": true)."""

    default_code = "type_error"

    def __init__(self, errors: list[dict]):
        HubError.__init__(self, f"the plugin does not type-check: line {errors[0]['line']}, column "
                                f"{errors[0]['column']}: {errors[0]['message']}", errors=errors)


class PlatformError(HubError):
    """The platform bridge is not configured, or the platform did not answer with a 2xx."""

    status_code = status.HTTP_502_BAD_GATEWAY
    default_code = "platform_error"

    def __init__(self, message: str, *, retryable: bool = True):
        super().__init__(message)
        self.retryable = retryable


class SshUnavailable(HubError):
    """The SSH server could not be reached, trusted or logged into; nothing ran on it."""

    status_code = status.HTTP_502_BAD_GATEWAY
    default_code = "ssh_unavailable"


class Unavailable(HubError):
    """A part the call needs is away for a moment (the hook engines, the database): nothing ran and
    nothing changed; the caller may send the same call again after `retry_after` seconds."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"

    def __init__(self, message: str, *, retry_after: int):
        super().__init__(message, retryAfter=retry_after)
        self.retry_after = retry_after


class Overloaded(Unavailable):
    """The call could not start within the queue deadline (load shedding): nothing ran; the platform's
    retry after `retry_after` seconds is cheaper than a long answer."""

    default_code = "overloaded"

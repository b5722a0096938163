"""What every API request passes before its view runs: query and path text, path ids, the body's fields."""

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import unquote_to_bytes

from django.core.handlers.wsgi import get_bytes_from_wsgi
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from plugins_app.errors import InvalidInput, NotFound
from plugins_app.services import inputs
from plugins_app.services.ids import parse_id

F = TypeVar("F", bound=Callable[..., Any])
# A serializer class or instance (an inline_serializer is an instance).
SerializerLike = type[serializers.BaseSerializer] | serializers.BaseSerializer

# Path parameters that are not the hub's database ids: agents are the platform's, named by it.
NOT_DB_IDS = {"agent_id"}


class UnknownField(InvalidInput):
    def __init__(self, path: str):
        super().__init__(path, "unknown field")


def body(serializer: SerializerLike, *, partial: bool = False, **schema: Any) -> Callable[[F], F]:
    """Documents a method's JSON body as `serializer` and makes it the only shape accepted: a field
    it does not declare (at any depth it describes) is refused with 400 before the view runs.
    `partial`: the body may leave out required fields (a PATCH of some fields)."""
    def decorate(method: F) -> F:
        method.request_body = (serializer, partial)  # type: ignore[attr-defined]  # read by check_request
        return extend_schema(request=serializer, **schema)(method)
    return decorate


def body_field(request: Request, name: str, hint: str, *, allow_null: bool = True) -> Any:
    """The value of `name` in a one-field object body, or InvalidInput(`name`, `hint`) when the body is
    not an object or leaves it out (or sends null where `allow_null` is false). Its value is the
    service's to check."""
    data = request.data
    if not isinstance(data, dict) or name not in data or (data[name] is None and not allow_null):
        raise InvalidInput(name, hint)
    return data[name]


def check_request(view: APIView, request: Request, kwargs: dict[str, Any]) -> None:
    check_query(request)
    check_path(kwargs)
    handler = getattr(view, (request.method or "").lower(), None)   # None only for a request built by hand
    declared = getattr(handler, "request_body", None)
    if declared is not None and _has_body(request):
        serializer, partial = declared
        check_fields(serializer, request.data, partial=partial)


def check_query(request: Request) -> None:
    raw = get_bytes_from_wsgi(request._request.META, "QUERY_STRING", "")   # as Django reads it
    if not raw or (raw.isascii() and b"%" not in raw):
        return
    for part in raw.split(b"&"):
        name, _, value = part.partition(b"=")
        name_bytes = unquote_to_bytes(name.replace(b"+", b" "))
        field = name_bytes.decode("utf-8", "backslashreplace").replace("\x00", "\\u0000")
        for piece in (name_bytes, unquote_to_bytes(value.replace(b"+", b" "))):
            try:
                text = piece.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInput(field, "is not valid UTF-8 text") from None
            if "\x00" in text:
                raise InvalidInput(field, "contains a NUL character")


def check_path(kwargs: dict[str, Any]) -> None:
    for name, value in kwargs.items():
        if isinstance(value, str):
            problem = inputs.text_problem(value)
            if problem:
                raise InvalidInput(name, problem)
            if name.endswith("_id") and name not in NOT_DB_IDS:
                _path_id(name, value)


def _path_id(name: str, value: str) -> None:
    # A path segment that is not an id names no object: 404, as for an id that does not exist.
    try:
        parse_id(value, name)
    except InvalidInput as exc:
        raise NotFound(str(exc.detail), field=name) from None


def check_fields(serializer: Any, data: Any, path: str = "", *, partial: bool = False) -> None:
    """Refuse the first key of `data` that `serializer` (a class or instance) does not declare; when
    a required field is missing too, that is named instead (the likelier mistake is a misspelling)."""
    if isinstance(serializer, type):
        serializer = _instance(serializer)
    if isinstance(serializer, serializers.ListSerializer):
        if isinstance(data, list):
            for index, item in enumerate(data):
                check_fields(serializer.child, item, f"{path}[{index}]")
        return
    if not isinstance(serializer, serializers.Serializer) or not isinstance(data, dict):
        return
    fields = serializer.fields
    for key, value in data.items():
        key_path = f"{path}.{key}" if path else key
        field = fields.get(key)
        if field is None or field.read_only:
            missing = None if partial else _first_missing(fields, data)
            if missing is not None:
                raise InvalidInput(f"{path}.{missing}" if path else missing, "this field is required")
            raise UnknownField(key_path)
        check_fields(field, value, key_path)


@functools.cache
def _instance(serializer_class: type[serializers.BaseSerializer]) -> serializers.BaseSerializer:
    # One instance per class: its fields are built once, not on every request (execute is hot).
    return serializer_class()


def _first_missing(fields: Mapping[str, serializers.Field], data: dict[str, Any]) -> str | None:
    return next((name for name, f in fields.items() if f.required and not f.read_only and name not in data), None)


def _has_body(request: Request) -> bool:
    meta = request._request.META
    return bool(meta.get("CONTENT_LENGTH") not in (None, "", "0") or meta.get("HTTP_TRANSFER_ENCODING"))

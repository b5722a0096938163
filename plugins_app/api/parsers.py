"""A JSON parser that refuses bodies over the configured size before reading them whole, bodies nested
too deep before parsing them, and text that is not valid Unicode or holds NUL after. orjson reads
a body wherever it reads it as the standard library would; the standard library reads the rest."""

import io
import re
from collections.abc import Mapping
from typing import IO, Any

import orjson
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from plugins_app.errors import PayloadTooLarge
from plugins_app.services import inputs

# A number token of 19 digits or more: orjson would read one past 64 bits as a float, losing
# digits, where the standard library keeps the exact int. (Digits inside a string only cost the
# fast path: a string's opening quote is not among the characters that may precede a token.)
_LONG_NUMBER = re.compile(rb"(?:^|[\[:,\s])-?\d{19}")
_UTF8 = {"utf-8", "utf8"}


class LimitedJSONParser(JSONParser):
    def parse(self, stream: IO[Any] | None, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        # A view may allow a larger body (installing a bundled plugin): its `max_body_bytes`.
        view = (parser_context or {}).get("view")
        limit = getattr(view, "max_body_bytes", None) or settings.HUB_API_MAX_BODY_BYTES
        request = (parser_context or {}).get("request")
        length = request.META.get("CONTENT_LENGTH") if request is not None else None
        if length and str(length).isdigit() and int(length) > limit:
            raise PayloadTooLarge(f"the request body is over the {_size(limit)} limit")
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(f"the request body is over the {_size(limit)} limit")
        if inputs.too_deep(raw):
            raise ParseError(f"the body nests arrays and objects deeper than {inputs.MAX_DEPTH} levels")
        data = self._fast(raw, parser_context)
        if data is _SLOW:
            try:
                data = super().parse(io.BytesIO(raw), media_type, parser_context)
            except ParseError as exc:
                raise ParseError(f"the body is not valid JSON: {exc.detail}") from None
        if inputs.may_hold_bad_text(raw):
            inputs.check_text(data)
        return data

    @staticmethod
    def _fast(raw: bytes, parser_context: Mapping[str, Any] | None) -> object:
        """orjson's reading of a body, or _SLOW where it might differ from the standard library's:
        another charset, a long number, or text orjson refuses (the slow path names the problem,
        or accepts a lone surrogate for check_text to name)."""
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        if encoding.lower() not in _UTF8 or _LONG_NUMBER.search(raw):
            return _SLOW
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return _SLOW


_SLOW = object()


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit % (1024 * 1024) == 0 else f"{limit // 1024} KiB"

"""How the execute call answers: orjson's bytes where they match DRF's, and the usual headers
negotiated without parsing them; DRF's own ways otherwise."""

from typing import NoReturn

import orjson
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer

# Anything beyond plain JSON types goes to `_refuse`, so DRF's encoder renders it as it always has.
_PLAIN_ONLY = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def _refuse(value: object) -> NoReturn:
    raise TypeError(type(value).__name__)


class PlainJSONRenderer(JSONRenderer):
    """DRF's compact JSON, written by orjson when the data is plain dicts, lists, strings, numbers,
    booleans and None: the execute call answers on the platform's hot path. The values are the
    same; a float may be spelled differently (1e-7, not 1e-07), and a non-finite float, which the
    execute answer never holds (its values came through JSON), would be null rather than an error."""

    # Unannotated, as DRF's: its stubs type get_indent's media type as str, which DRF passes None.
    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None or self.get_indent(accepted_media_type, renderer_context or {}) is not None:
            return super().render(data, accepted_media_type, renderer_context)
        try:
            rendered = orjson.dumps(data, default=_refuse, option=_PLAIN_ONLY)
        except TypeError:   # other types, ints past 64 bits, lone surrogates: DRF's encoder decides
            return super().render(data, accepted_media_type, renderer_context)
        # DRF escapes these two line separators, which JavaScript strings could not hold raw.
        if b"\xe2\x80\xa8" in rendered or b"\xe2\x80\xa9" in rendered:
            rendered = rendered.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
        return rendered


JSON = "application/json"
_PLAIN_ACCEPTS = {None, "*/*", JSON}


class JSONFirstNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, with the platform's usual execute call (a JSON body; an Accept header of
    */*, application/json or none; no query string) settled without parsing media types. The
    choice is the one DRF's would make: the first parser and renderer, both JSON."""

    # Unannotated, as DRF's: its stubs type the parsers and renderers as any iterable; DRF passes the
    # view's lists, which these index.
    def select_parser(self, request, parsers):
        if request.content_type == JSON and parsers and parsers[0].media_type == JSON:
            return parsers[0]
        return super().select_parser(request, parsers)

    def select_renderer(self, request, renderers, format_suffix=None):
        meta = request._request.META
        if (format_suffix is None and not meta.get("QUERY_STRING") and meta.get("HTTP_ACCEPT") in _PLAIN_ACCEPTS
                and renderers and renderers[0].media_type == JSON):
            return renderers[0], JSON
        return super().select_renderer(request, renderers, format_suffix)

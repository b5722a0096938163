"""The account as a whole: its state in one answer (what `hub export` writes) and its live tail."""

import json
from collections.abc import Iterator

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from plugins_app.api.account.serializers import TailEventSerializer
from plugins_app.api.base import AccountView
from plugins_app.runtime.protocol import TRACE_STATUSES
from plugins_app.services.observability import tail
from plugins_app.services.observability.streams import event_stream
from plugins_app.services.plugins import export


class AccountExportView(AccountView):
    @extend_schema(responses=OpenApiTypes.OBJECT,
                   summary="Installations (settings without secrets, own plugins' source) and chain orders")
    def get(self, request: Request) -> Response:
        return Response(export.account_state(self.account))


class EventStreamRenderer(JSONRenderer):
    """Lets a client ask for text/event-stream; an error answer is still the usual JSON body."""

    media_type = "text/event-stream"
    format = "sse"


class _ServerSentEvents:
    """A tail stream as Server-Sent Events; Django closes it (and so the stream) when the response ends."""

    def __init__(self, stream: tail.TailStream):
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        for event in self.stream:
            if event is None:
                yield b": keepalive\n\n"
            else:
                yield f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()

    def close(self) -> None:
        self.stream.close()


class TailView(AccountView):
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(summary="The account's handler runs, logs, warnings and cancels as they happen "
                           "(Server-Sent Events)",
                   description="A stream of Server-Sent Events: `event: <type>` then `data: <TailEvent JSON>` "
                               "and a blank line per event, until the stream's time is up (then reconnect).",
                   responses={(200, "text/event-stream"): OpenApiResponse(
                       TailEventSerializer, description="each event's `data:` line is one TailEvent")},
                   parameters=[OpenApiParameter("plugin", str, description="only this plugin slug"),
                               OpenApiParameter("hook", str, description="only this hook"),
                               OpenApiParameter("status", str, description="comma-separated: " +
                                                ", ".join(TRACE_STATUSES))])
    def get(self, request: Request) -> StreamingHttpResponse:
        stream = tail.open_stream(self.account.pk, tail.Filters.parse(request.query_params))
        return event_stream(request, _ServerSentEvents(stream))

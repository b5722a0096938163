"""A server-sent event stream that a client reads as it is written, under WSGI and ASGI alike.

Under ASGI Django consumes a synchronous iterator whole before it sends anything (a stream that never
ends would never be sent), so there each event is taken from the stream on a worker thread, one at a
time, and handed on as an async iterator; under WSGI the iterator is served as it is."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, StreamingHttpResponse

_END = object()


def event_stream(request: HttpRequest | Any, events: Iterable[bytes]) -> StreamingHttpResponse:
    """`request`: Django's, or DRF's (which hands attributes on to Django's); served by ASGI, it has a scope."""
    served_by_asgi = getattr(request, "scope", None) is not None
    body: Iterable[bytes] | AsyncIterator[bytes] = _async(events) if served_by_asgi else events
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"   # a reverse proxy must pass each event on at once
    return response


async def _async(events: Iterable[bytes]) -> AsyncIterator[bytes]:
    iterator: Iterator[bytes] = iter(events)

    def following() -> object:
        return next(iterator, _END)

    take = sync_to_async(following, thread_sensitive=False)   # each wait for an event holds a thread, not the loop
    try:
        while isinstance(chunk := await take(), bytes):
            yield chunk
    finally:
        close: Any = getattr(events, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=False)()

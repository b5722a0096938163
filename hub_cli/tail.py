"""`hub tail`: the account's live stream (Server-Sent Events from GET /api/v1/tail), printed as it comes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

from hub_cli.client import ApiError, Client
from hub_cli.clock import clock_time

RECONNECT_SECONDS = 1.0
READ_TIMEOUT_SECONDS = 30.0   # the hub sends a keepalive every 5 s: this long silent means the link is gone


def events(client: Client, params: dict) -> Iterator[dict]:
    """Parsed events of one stream; ends when the hub closes it."""
    data: list[str] = []
    for raw in client.stream("tail", params, READ_TIMEOUT_SECONDS):
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


def follow(client: Client, params: dict, show: Callable[[dict], None], count: int | None = None) -> int:
    """Streams events to `show`, reconnecting when the hub ends a stream (its connections are bounded);
    stops after `count` events (not counting `ready`). An error answer (bad filter, bad key) stops it."""
    shown = 0
    while True:
        try:
            for event in events(client, params):
                show(event)
                if event.get("type") != "ready":
                    shown += 1
                    if count is not None and shown >= count:
                        return shown
        except ApiError as exc:
            if exc.status != 0:
                raise
        except OSError:
            pass   # the connection dropped or went silent past READ_TIMEOUT_SECONDS: connect again
        time.sleep(RECONNECT_SECONDS)


def line(event: dict) -> str:
    """One event as a readable line."""
    kind = event.get("type")
    when = clock_time(event.get("at", time.time()))
    where = f"{event.get('hook')} {event.get('plugin')}" + (f" v{event['version']}" if event.get("version") else "")
    if kind == "run":
        changed = " changed" if event.get("changed") else ""
        return f"{when} run     {where} {event['status']} {event['durationMs']:.1f} ms{changed}"
    if kind == "log":
        return f"{when} log     {where} [{event.get('level')}] {event.get('message')}"
    if kind == "warning":
        return f"{when} warning {where} {event['status']}: {event.get('message')}"
    if kind == "cancel":
        return f"{when} cancel  {where}: {event.get('reason')}"
    if kind == "dropped":
        return f"{when} dropped {event['count']} event(s): over 200 a second for this account"
    return f"{when} {kind}"

"""How a chain run's tail events get from the process that ran it to the process streaming them.

gunicorn's workers share nothing in memory, so a run in one worker must cross to the worker holding
the stream. Two channels, chosen by TailConfig (docs/cli.md#live-tail says why):
- `RedisChannel`: pub/sub on `hub:tail:<account>` when the hub has a Redis (across machines too);
- `FileChannel`: an append-only file per account in a shared folder, read from its end by each stream
  (one machine, no server): a line is written with one O_APPEND write, so lines never interleave.
Both publish only while someone listens (a marker a stream refreshes; for Redis, what the last PUBLISH
answered), so an untailed account costs one cached check per run."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from plugins_app.errors import Unavailable
from plugins_app.services.observability.redis_guard import Breaker, Sender

LISTEN_FRESH_SECONDS = 10.0   # a stream refreshes its marker every few seconds; older means gone
CHECK_CACHE_SECONDS = 0.5     # a publisher asks "anyone listening?" at most this often per account
ROTATE_BYTES = 4 * 1024 * 1024   # a ring file is rotated past this; an open stream reads it to its end
POLL_SECONDS = 0.05           # a file stream's wait between looks for new lines


class Subscription(Protocol):
    def read(self, timeout: float) -> list[dict]: ...
    def close(self) -> None: ...


class Channel(Protocol):
    def publish(self, account_id: int, events: list[dict]) -> None: ...
    def listening(self, account_id: int) -> bool: ...
    def subscribe(self, account_id: int) -> Subscription: ...


class _ListenCache:
    """`listening` answers per account, remembered for CHECK_CACHE_SECONDS."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[float, bool]] = {}
        self._lock = threading.Lock()

    def get(self, account_id: int, probe) -> bool:
        now = time.monotonic()
        with self._lock:
            cached = self._seen.get(account_id)
        if cached and now - cached[0] < CHECK_CACHE_SECONDS:
            return cached[1]
        answer = bool(probe())
        with self._lock:
            self._seen[account_id] = (now, answer)
        return answer

    def forget(self, account_id: int) -> None:
        with self._lock:
            self._seen.pop(account_id, None)


def _lines(events: Iterable[dict]) -> bytes:
    return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in events)


class FileChannel:
    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._cache = _ListenCache()

    def _ring(self, account_id: int) -> Path:
        return self.directory / f"{int(account_id)}.jsonl"

    def _markers(self, account_id: int) -> list[Path]:
        return list(self.directory.glob(f"{int(account_id)}.listen.*"))

    def listening(self, account_id: int) -> bool:
        return self._cache.get(account_id, lambda: any(age < LISTEN_FRESH_SECONDS for age in self._ages(account_id)))

    def _ages(self, account_id: int) -> list[float]:
        """Seconds since each of the account's stream markers was refreshed (one gone meanwhile is skipped)."""
        now, ages = time.time(), []
        for marker in self._markers(account_id):
            try:
                ages.append(now - marker.stat().st_mtime)
            except FileNotFoundError:
                pass
        return ages

    def publish(self, account_id: int, events: list[dict]) -> None:
        path = self._ring(account_id)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, _lines(events))   # one write: concurrent publishers' lines never interleave
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > ROTATE_BYTES:
            try:   # streams keep reading the renamed file through their open handle, then reopen
                os.replace(path, path.with_suffix(".old"))
            except FileNotFoundError:
                pass   # another process rotated it first

    def subscribe(self, account_id: int) -> FileSubscription:
        self._sweep(account_id)
        subscription = FileSubscription(self._ring(account_id), self.directory / f"{int(account_id)}.listen."
                                        f"{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}")
        self._cache.forget(account_id)
        return subscription

    def _sweep(self, account_id: int) -> None:
        """Markers a killed process left behind (they stopped counting after LISTEN_FRESH_SECONDS)."""
        now = time.time()
        for marker in self._markers(account_id):
            try:
                if now - marker.stat().st_mtime > 6 * LISTEN_FRESH_SECONDS:
                    marker.unlink()
            except FileNotFoundError:
                pass   # its stream closed meanwhile


class FileSubscription:
    """Reads an account's ring from where it ended when the stream began, following rotations."""

    def __init__(self, ring: Path, marker: Path):
        self.ring, self.marker = ring, marker
        self.marker.touch()
        self._touched = time.monotonic()
        self._file = self._open(at_end=True)
        self._partial = b""

    def _open(self, at_end: bool):
        fd = os.open(self.ring, os.O_RDONLY | os.O_CREAT, 0o600)
        handle = os.fdopen(fd, "rb")
        if at_end:
            handle.seek(0, os.SEEK_END)
        return handle

    def _rotated(self) -> bool:
        try:
            return os.stat(self.ring).st_ino != os.fstat(self._file.fileno()).st_ino
        except FileNotFoundError:
            return False

    def _take(self) -> list[dict]:
        data = self._partial + self._file.read()
        *complete, self._partial = data.split(b"\n")
        if not complete and self._rotated():   # the old file is read to its end: follow the new one
            self._file.close()
            self._file, self._partial = self._open(at_end=False), b""
        return [json.loads(line) for line in complete if line]

    def read(self, timeout: float) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            if time.monotonic() - self._touched > LISTEN_FRESH_SECONDS / 3:
                self.marker.touch()
                self._touched = time.monotonic()
            events = self._take()
            if events or time.monotonic() >= deadline:
                return events
            time.sleep(POLL_SECONDS)

    def close(self) -> None:
        self._file.close()
        self.marker.unlink(missing_ok=True)


class RedisChannel:
    """Publishing never waits on Redis (issue 40, item 2: a frozen Redis held every execute call for
    redis-py's timeout in the "anyone listening?" check). Publishes are handed to a thread; PUBLISH
    answers how many listened, and that answer is the cached "anyone listening?" (for
    CHECK_CACHE_SECONDS; unknown or stale, the run is published to find out). A Redis that does not
    answer within `timeout` opens the breaker: nothing is published or asked for `retry_seconds`,
    then one publish probes it."""

    def __init__(self, url: str, timeout: float = 0.5, retry_seconds: float = 5.0):
        import redis  # only a hub with a Redis needs the client loaded
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # One try, bounded: redis-py's default retries with backoff would multiply the wait.
        self._redis = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                           retry=Retry(NoBackoff(), 0))
        self._seen: dict[int, tuple[float, bool]] = {}   # account -> (when PUBLISH answered, anyone listened)
        self.sender = Sender("hub-tail-publisher", Breaker(retry_seconds))

    @staticmethod
    def _name(account_id: int) -> str:
        return f"hub:tail:{int(account_id)}"

    def listening(self, account_id: int) -> bool:
        """From memory only: the last PUBLISH's answer while fresh; else whether Redis may be asked."""
        seen = self._seen.get(account_id)
        if seen is not None and time.monotonic() - seen[0] < CHECK_CACHE_SECONDS:
            return seen[1]
        return self.sender.breaker.may_ask()

    def publish(self, account_id: int, events: list[dict]) -> None:
        name, data = self._name(account_id), _lines(events)

        def send() -> None:
            listeners = self._redis.publish(name, data)
            self._seen[account_id] = (time.monotonic(), bool(listeners))

        self.sender.submit(send)

    def subscribe(self, account_id: int) -> RedisSubscription:
        """A stream's subscription (the tail request waits on Redis, bounded by the timeout; a Redis the
        breaker gave up on, or that does not answer now, is the API's JSON 503)."""
        from redis.exceptions import RedisError

        retry = max(1, round(self.sender.breaker.cool_down))
        if not self.sender.breaker.may_ask():
            raise Unavailable("the live tail's Redis is not answering; try again shortly", retry_after=retry)
        self._seen.pop(account_id, None)
        try:
            return RedisSubscription(self._redis, self._name(account_id))
        except RedisError:
            self.sender.breaker.failed()
            raise Unavailable("the live tail's Redis is not answering; try again shortly", retry_after=retry) from None


class RedisSubscription:
    def __init__(self, client, name: str):
        self._pubsub = client.pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(name)
        self._pubsub.get_message(timeout=1.0)   # the subscribe confirmation: listening from here on

    def read(self, timeout: float) -> list[dict]:
        message = self._pubsub.get_message(timeout=timeout)
        events = []
        while message is not None:
            if message.get("type") == "message":
                events += [json.loads(line) for line in message["data"].split(b"\n") if line]
            message = self._pubsub.get_message(timeout=0)
        return events

    def close(self) -> None:
        self._pubsub.close()

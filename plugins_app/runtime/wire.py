"""The parent<->engine wire: length-prefixed frames, and JSON in them (orjson where it can, the
standard library where it can't)."""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import orjson

_LENGTH = struct.Struct("!i")   # multiprocessing.Connection's frame header, so either end may be one
HEADER_SIZE = _LENGTH.size
READ_SIZE = 64 * 1024


def frame(data: bytes) -> bytes:
    """`data` as one frame on the wire: its length, then itself."""
    return _LENGTH.pack(len(data)) + data


def frame_length(header: bytes) -> int:
    """The length of the frame whose HEADER_SIZE bytes of header these are."""
    length: int = _LENGTH.unpack(header)[0]
    return length


class Frames:
    """Frames over a connected stream socket's descriptor (blocking), owned from here on. A frame
    that arrives whole is read with one read(): Connection.recv_bytes reads the header and the body
    separately, and both reads are on the hot path of every chain, at each end."""

    def __init__(self, fd: int):
        self._fd = fd
        self._buffer = bytearray()   # read past the last frame taken
        self.closed = False

    def fileno(self) -> int:
        return self._fd

    def send_bytes(self, data: bytes) -> None:
        whole = frame(data)
        written = os.write(self._fd, whole)
        if written < len(whole):   # a large frame (code being shipped) fills the socket's buffer
            view = memoryview(whole)[written:]
            while view:
                view = view[os.write(self._fd, view):]

    def recv_bytes(self) -> bytes:
        """The next frame; EOFError once the other end has closed."""
        if not self._buffer:
            chunk = self._read(READ_SIZE)
            if len(chunk) >= _LENGTH.size and _LENGTH.unpack_from(chunk)[0] == len(chunk) - _LENGTH.size:
                return chunk[_LENGTH.size:]   # the usual case: exactly one whole frame
            self._buffer += chunk
        while (end := self._frame_end()) > len(self._buffer):
            self._buffer += self._read(max(end - len(self._buffer), READ_SIZE))
        body = bytes(self._buffer[_LENGTH.size:end])
        del self._buffer[:end]
        return body

    def has_frame(self) -> bool:
        """Whether a whole frame was read already (the descriptor may not be readable then)."""
        return len(self._buffer) >= self._frame_end()

    def _frame_end(self) -> int:
        """Where the buffered frame ends; while its length is not in yet, where that length ends."""
        if len(self._buffer) < _LENGTH.size:
            return _LENGTH.size
        length: int = _LENGTH.unpack_from(self._buffer)[0]
        return _LENGTH.size + length

    def _read(self, size: int) -> bytes:
        chunk = os.read(self._fd, size)
        if not chunk:
            raise EOFError
        return chunk

    def close(self) -> None:
        """Closes the descriptor. A send from another thread afterwards (an answer given on an
        isolate's thread) fails with EBADF: the number is forgotten first, never written to again
        once it may belong to a newer connection."""
        if not self.closed:
            self.closed = True
            fd, self._fd = self._fd, -1
            os.close(fd)


def dumps(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj)
    except TypeError:   # ints beyond 64 bits, lone surrogates: rare, and json handles both
        return json.dumps(obj).encode()


def loads(data: bytes | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:   # lone surrogates that JSON.stringify escaped
        return _repaired(json.loads(data))


def _repaired(value: Any) -> Any:
    """`value` with every lone surrogate replaced by U+FFFD: text leaving V8 is always valid Unicode."""
    if isinstance(value, str):
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in value) if _has_surrogate(value) else value
    if isinstance(value, list):
        return [_repaired(v) for v in value]
    if isinstance(value, dict):
        return {_repaired(k): _repaired(v) for k, v in value.items()}
    return value


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


"""The parent<->engine wire's frames: whole frames in one read, split and bunched frames kept apart."""

import os
import socket
import struct
import threading
from multiprocessing.connection import Connection

import pytest

from plugins_app.runtime import wire
from plugins_app.runtime.web.tier import EngineLink


def pair() -> tuple[wire.Frames, socket.socket]:
    ours, theirs = socket.socketpair()
    return wire.Frames(ours.detach()), theirs


def frame(data: bytes) -> bytes:
    return struct.pack("!i", len(data)) + data


def test_a_frame_that_arrives_whole_is_read_with_one_read(monkeypatch):
    frames, peer = pair()
    reads = []
    real_read = os.read
    monkeypatch.setattr(wire.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    peer.sendall(frame(b'{"op":"ping"}'))
    assert frames.recv_bytes() == b'{"op":"ping"}'
    assert len(reads) == 1 and not frames.has_frame()


def test_split_and_bunched_frames_come_out_whole_and_in_order():
    frames, peer = pair()
    stream = frame(b"first") + frame(b"") + frame(b"x" * 100_000) + frame(b"last")
    sender = threading.Thread(target=lambda: [peer.sendall(stream[i:i + 3]) for i in range(0, 9, 3)]
                              + [peer.sendall(stream[9:])])
    sender.start()
    got = [frames.recv_bytes() for _ in range(4)]
    sender.join(10)
    assert got == [b"first", b"", b"x" * 100_000, b"last"]
    peer.close()
    with pytest.raises(EOFError):
        frames.recv_bytes()


def test_a_bunch_read_at_once_leaves_the_rest_waiting_without_the_socket_being_readable():
    frames, peer = pair()
    peer.sendall(frame(b"one") + frame(b"two"))
    assert frames.recv_bytes() == b"one"
    assert frames.has_frame()   # read already: a poll of the socket would not see it
    assert frames.recv_bytes() == b"two" and not frames.has_frame()


def test_either_end_may_be_a_multiprocessing_connection():
    ours, theirs = socket.socketpair()
    frames, conn = wire.Frames(ours.detach()), Connection(theirs.detach())
    big = os.urandom(3 * 1024 * 1024)   # larger than the socket's buffer: written in several goes
    sender = threading.Thread(target=frames.send_bytes, args=(big,))
    sender.start()
    assert conn.recv_bytes() == big
    sender.join(10)
    conn.send_bytes(b"back")
    assert frames.recv_bytes() == b"back"


def test_an_engine_answers_every_frame_of_a_bunch(one_engine):
    _, tier = one_engine
    link = EngineLink.connect(tier.engines[0])
    pings = b"".join(frame(wire.dumps({"op": "ping", "id": n})) for n in (101, 102, 103))
    os.write(link.conn.fileno(), pings)   # one write: the engine reads them in one go
    answers = []
    for _ in range(3):
        assert link.conn.has_frame() or link.readable.poll(10_000), f"answered only {answers}"
        answers.append(wire.loads(link.conn.recv_bytes())["id"])
    assert answers == [101, 102, 103]
    link.close()


def test_the_web_side_reads_a_result_that_came_in_one_read_with_a_notice():
    frames, peer = pair()
    link = EngineLink(frames)
    slow, finished = [], threading.Event()

    def engine():
        request = Connection(peer.detach())
        message = wire.loads(request.recv_bytes())
        os.write(request.fileno(), frame(wire.dumps({"op": "slow", "handler": "7"}))
                 + frame(wire.dumps({"op": "result", "id": message["id"], "done": True})))
        finished.wait(10)   # the connection stays open: its end would make the socket readable

    threading.Thread(target=engine, daemon=True).start()
    try:
        reply = link.request({"op": "run"}, on_slow=slow.append, silence_limit=2)
    finally:
        finished.set()
    assert reply["done"] is True and slow == ["7"]


def test_a_closed_connection_never_writes_to_its_old_descriptor_number():
    frames, peer = pair()
    number = frames.fileno()
    frames.close()
    reused, other = socket.socketpair()   # takes the lowest free numbers: the one just closed
    try:
        assert number in (reused.fileno(), other.fileno())
        with pytest.raises(OSError):
            frames.send_bytes(b"late answer")   # as an isolate's thread might, after the drop
        for end in (reused, other):
            end.setblocking(False)
            with pytest.raises(BlockingIOError):
                end.recv(64)   # nothing reached the connection that took the number over
    finally:
        reused.close()
        other.close()
        peer.close()

"""The development server's log: a refused request shows once, a static file not at all."""

import io
import logging
import threading
import time
import urllib.error
import urllib.request

import pytest
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
from django.core.wsgi import get_wsgi_application


@pytest.fixture
def console():
    """What the configured console handler prints, for the duration of the test."""
    (handler,) = logging.getLogger("django").handlers
    stream = io.StringIO()
    saved = handler.setStream(stream)
    yield stream
    handler.setStream(saved)


@pytest.fixture
def dev_server(transactional_db):
    """runserver's own request handler (it logs to django.server) and static files, on a free loopback port."""
    server = ThreadedWSGIServer(("127.0.0.1", 0), WSGIRequestHandler)
    server.set_app(StaticFilesHandler(get_wsgi_application()))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code


def test_a_refused_request_is_logged_once(dev_server, console):
    assert _get(f"{dev_server}/api/v1/changes") in (401, 403)
    deadline = time.monotonic() + 10   # the line is written after the answer went out
    while not (lines := [line for line in console.getvalue().splitlines() if "/api/v1/changes" in line]):
        assert time.monotonic() < deadline, "the refused request was never logged"
        time.sleep(0.01)
    assert len(lines) == 1, lines


def test_static_files_write_no_lines_and_pages_still_do(dev_server, console):
    assert _get(f"{dev_server}/static/admin/css/base.css") == 200
    assert _get(f"{dev_server}/healthz") in (200, 503)
    # The server writes a request's line after its answer went out: wait for the page's, which comes
    # after the static file's.
    deadline = time.monotonic() + 10
    while "/healthz" not in console.getvalue():
        assert time.monotonic() < deadline, f"the page's request was never logged: {console.getvalue()!r}"
        time.sleep(0.01)
    assert "/static/" not in console.getvalue()

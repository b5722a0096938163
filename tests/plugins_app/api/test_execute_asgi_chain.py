"""The execute API's middleware chain under ASGI never hops onto asgiref's shared sync thread
(plugins_app/api/execution/asgi_handler.py): every call in flight would queue there."""

import asyncio
import io

import asgiref.sync
import pytest
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler, ASGIRequest

from plugins_app.api.execution.asgi_handler import EXECUTE_CHAIN, ExecuteASGIHandler

SCOPE = {"type": "http", "method": "POST", "path": "/api/v1/hooks/systemPrompt/execute", "root_path": "",
         "query_string": b"", "headers": [(b"content-type", b"application/json")], "server": ("127.0.0.1", 80),
         "client": ("127.0.0.1", 5000), "scheme": "http"}


def test_every_project_middleware_has_a_stated_part_in_an_execute_call():
    assert list(EXECUTE_CHAIN) == list(settings.MIDDLEWARE)


def thread_sensitive_hops(handler: ASGIHandler, monkeypatch) -> tuple[list, int, dict]:
    """Runs one unauthenticated execute call through the handler's middleware chain; counts the steps
    it sent to asgiref's shared thread (thread_sensitive, no executor of its own)."""
    hops = []
    real_init = asgiref.sync.SyncToAsync.__init__

    def counting_init(self, func, thread_sensitive=True, executor=None, **kwargs):
        if thread_sensitive and executor is None:
            hops.append(getattr(func, "__qualname__", repr(func)))
        real_init(self, func, thread_sensitive=thread_sensitive, executor=executor, **kwargs)

    monkeypatch.setattr(asgiref.sync.SyncToAsync, "__init__", counting_init)
    request = ASGIRequest(SCOPE, io.BytesIO(b'{"context": {}}'))
    response = asyncio.run(handler.get_response_async(request))
    monkeypatch.undo()
    return hops, response.status_code, dict(response.items())


@pytest.mark.django_db(transaction=True)
def test_an_execute_call_makes_no_hop_onto_the_shared_thread(monkeypatch):
    hops, status, headers = thread_sensitive_hops(ExecuteASGIHandler(), monkeypatch)
    assert status == 401   # DRF answered it: the key's check ran, on the view's own step thread
    assert hops == [], hops
    # The security headers the inline hooks set, as the full chain would.
    assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.django_db(transaction=True)
def test_djangos_own_chain_would_hop_for_every_sync_hook(monkeypatch):
    # The same call through Django's handler: what the execute handler saves (the test above could fail).
    hops, status, _ = thread_sensitive_hops(ASGIHandler(), monkeypatch)
    assert status == 401
    assert len(hops) >= 8, hops

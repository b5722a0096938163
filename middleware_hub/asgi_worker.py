"""gunicorn's ASGI worker for the hub: uvicorn's, serving middleware_hub.asgi whichever module was named."""

from typing import Any

from uvicorn_worker import UvicornWorker


class HubWorker(UvicornWorker):
    """uvicorn's worker (uvloop, httptools; no lifespan: Django has none). `gunicorn middleware_hub.wsgi`, the
    command the docs and tools have always run, names the WSGI application: it is served as ASGI here."""

    # httptools, not h11: at 5x the sustainable rate h11's pure-Python parsing and writing took a fifth to a
    # quarter of each worker's event loop, most of it for calls answered 503 (docs/benchmarks.md).
    CONFIG_KWARGS: dict[str, Any] = {"loop": "uvloop", "http": "httptools", "lifespan": "off"}

    wsgi: Any   # gunicorn's name for the loaded application: here, an ASGI one

    def load_wsgi(self) -> None:
        super().load_wsgi()
        from django.core.handlers.wsgi import WSGIHandler

        if isinstance(self.wsgi, WSGIHandler):
            from middleware_hub.asgi import application

            self.wsgi = application

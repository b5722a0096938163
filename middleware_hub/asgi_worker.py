"""gunicorn's ASGI worker for the hub: uvicorn's, serving middleware_hub.asgi whichever module was named."""

from typing import Any

from uvicorn_worker import UvicornWorker


class HubWorker(UvicornWorker):
    """uvicorn's worker (uvloop, h11; no lifespan: Django has none). `gunicorn middleware_hub.wsgi`, the
    command the docs and tools have always run, names the WSGI application: it is served as ASGI here."""

    CONFIG_KWARGS: dict[str, Any] = {"loop": "uvloop", "http": "h11", "lifespan": "off"}

    wsgi: Any   # gunicorn's name for the loaded application: here, an ASGI one

    def load_wsgi(self) -> None:
        super().load_wsgi()
        from django.core.handlers.wsgi import WSGIHandler

        if isinstance(self.wsgi, WSGIHandler):
            from middleware_hub.asgi import application

            self.wsgi = application

"""ASGI entry point for Middleware Hub (`gunicorn middleware_hub.asgi`, with gunicorn.conf.py's worker)."""
import os
import re
import time

import django
from django.core.handlers.asgi import ASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "middleware_hub.settings")

EXECUTE_PATH = re.compile(r"^/api/v1/hooks/[^/]+/execute$")
ARRIVED = "hub.arrived"   # as plugins_app/api/admission.py reads it: when a request reached this handler


class HubASGIHandler(ASGIHandler):
    """Django's handler, but for the execute API. Django runs each request in a ThreadSensitiveContext:
    its first sync step (a signal receiver, a middleware's hook) starts a thread of the request's own,
    kept until the answer, so a call waiting on its engine would still hold an (idle) thread. The
    execute API's own sync steps run on a bounded pool (plugins_app/api/execution/async_views.py), and
    its middleware chain stays on the event loop (plugins_app/api/execution/asgi_handler.py); the two
    thread-sensitive steps Django still makes around it (request_started's and request_finished's
    receivers) run on asgiref's one shared sync thread."""

    def __init__(self) -> None:
        super().__init__()
        self.execute = ExecuteASGIHandler()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        # When the call reached this process: its queue deadline counts from here.
        scope[ARRIVED] = time.monotonic()
        path = _path_info(scope)
        if not admission.is_admitted(scope.get("method"), path):
            await super().__call__(scope, receive, send)
            return
        # Execute and try calls take their account's turn here, before Django builds a request: a call
        # shed under overload costs next to nothing (plugins_app/api/admission.py's admit_asgi).
        if EXECUTE_PATH.match(path):
            await admission.admit_asgi(scope, send, lambda: self.execute.handle(scope, receive, send))
        else:
            await admission.admit_asgi(scope, send, lambda: super(HubASGIHandler, self).__call__(scope, receive, send))


def _path_info(scope) -> str:
    path, root = scope.get("path", ""), scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


django.setup(set_prefix=False)
from plugins_app.api import admission  # noqa: E402  # after setup: it reads the settings and models
from plugins_app.api.execution.asgi_handler import ExecuteASGIHandler  # noqa: E402 - needs the apps loaded

application = HubASGIHandler()

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
    execute API's own sync steps run on a bounded pool (plugins_app/api/execution/async_views.py); the few
    thread-sensitive ones Django makes around them (request_started's receivers, the middlewares'
    hooks, microseconds each) run on asgiref's one shared sync thread instead."""

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            # When the call reached this process: its queue deadline counts from here, so the time it
            # waits behind Django's own steps (signals, middleware hooks) under load counts too.
            scope[ARRIVED] = time.monotonic()
        if scope["type"] == "http" and scope.get("method") == "POST" and EXECUTE_PATH.match(_path_info(scope)):
            await self.handle(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _path_info(scope) -> str:
    path, root = scope.get("path", ""), scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


django.setup(set_prefix=False)
application = HubASGIHandler()

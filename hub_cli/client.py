"""A small JSON client of the hub's REST API (stdlib only); errors keep the API's code, message and field."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from hub_cli.config import Target

TIMEOUT_SECONDS = 60   # an install compiles the plugin on the server: seconds, not milliseconds


class ApiError(Exception):
    """The hub answered with an error (or could not be reached: status 0)."""

    def __init__(self, status: int, message: str, code: str = "", field: str | None = None, extra: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.field = status, message, code, field
        self.extra = extra or {}


class Client:
    def __init__(self, target: Target):
        self.target = target

    def _request(self, method: str, path: str, body: Any = None, params: dict | None = None,
                 accept: str = "application/json", timeout: float | None = TIMEOUT_SECONDS):
        url = f"{self.target.url}/api/v1/{path.lstrip('/')}"
        if params:
            url += "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v not in (None, "")})
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self.target.key}", "Accept": accept, "Content-Type": "application/json"})
        try:
            return urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as exc:
            raise _api_error(exc) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(0, f"could not reach {self.target.url}: {reason}") from None

    def call(self, method: str, path: str, body: Any = None, params: dict | None = None) -> Any:
        with self._request(method, path, body, params) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def get(self, path: str, **params) -> Any:
        return self.call("GET", path, params=params)

    def post(self, path: str, body: Any = None) -> Any:
        return self.call("POST", path, {} if body is None else body)

    def patch(self, path: str, body: Any) -> Any:
        return self.call("PATCH", path, body)

    def put(self, path: str, body: Any) -> Any:
        return self.call("PUT", path, body)

    def stream(self, path: str, params: dict | None = None, timeout: float | None = None) -> Iterator[bytes]:
        """The lines of a streaming answer (Server-Sent Events), as they arrive; `timeout` bounds each read."""
        response = self._request("GET", path, params=params, accept="text/event-stream", timeout=timeout)
        with response:
            yield from response

    def installation_id(self, slug: str) -> str:
        for item in self.get("plugins")["plugins"]:
            if item["plugin"] == slug:
                return item["installationId"]
        raise ApiError(404, f"no plugin named {slug!r} is installed in this account", "not_found", "name")


def _api_error(exc: urllib.error.HTTPError) -> ApiError:
    try:
        payload = json.loads(exc.read() or b"{}")
    except ValueError:
        payload = {}
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        return ApiError(exc.code, f"HTTP {exc.code} {exc.reason}")
    extra = {k: v for k, v in error.items() if k not in ("code", "message", "field")}
    return ApiError(exc.code, str(error.get("message", "")), str(error.get("code", "")), error.get("field"), extra)

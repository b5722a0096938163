"""OpenAPI links from each operation that creates an object to the operations on it: clients (and the
stateful phase of the Schemathesis run in the tests) can follow a created id instead of guessing one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# The methods whose answer carries the object they made or registered.
CREATING = ("post", "put")


def add_links(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: a link from each 201 answer to every operation under the
    created object's path, its id taken from the answer's `id`."""
    paths = result.get("paths", {})
    for path, operations in paths.items():
        for method in CREATING:
            creating = operations.get(method, {})
            created = creating.get("responses", {}).get("201")
            item, parameter = _item_path(path, paths)
            if created is None or item is None:
                continue
            links = {op["operationId"]: {"operationId": op["operationId"],
                                         "parameters": {parameter: "$response.body#/id"}}
                     for op in _operations_under(item, paths) if op is not creating and "operationId" in op}
            if links:
                created["links"] = links
    return result


def _operations_under(item: str, paths: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for target_path, targets in paths.items():
        if target_path == item or target_path.startswith(item + "/"):
            yield from targets.values()


def _item_path(path: str, paths: dict[str, Any]) -> tuple[str | None, str | None]:
    """The path of one object made at `path` (`/things` makes `/things/{id}`; a PUT to `/things/{id}`
    registers that one) and its id parameter's name."""
    last = path.rsplit("/", 1)[-1]
    if last.startswith("{") and last.endswith("}"):
        return path, last[1:-1]
    for candidate in paths:
        head, _, tail = candidate.rpartition("/")
        if head == path and tail.startswith("{") and tail.endswith("}"):
            return candidate, tail[1:-1]
    return None, None

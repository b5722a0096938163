"""`?dryRun=true` on the write endpoints `hub apply` calls: the view runs as it always does, inside a
rehearsal (services/rehearsal.py) that rolls everything back, and answers 200 with what it would have done."""

import functools
from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from plugins_app.errors import InvalidInput
from plugins_app.services import rehearsal

PARAMETER = "dryRun"
EXTENSION = "x-hub-dry-run"   # marks an operation for document_dry_runs; taken out of the published schema
_YES, _NO = ("true", "1"), ("false", "0", "")

DRY_RUN_ANSWER = {
    "type": "object",
    "description": "What the call would have done (`?dryRun=true`): it ran in full and was rolled back, so "
                   "nothing was written, recorded or queued. A refusal answers exactly as the real call would.",
    "properties": {
        "dryRun": {"type": "boolean", "enum": [True]},
        "status": {"type": "integer", "description": "the status the real call would answer (201, 200 or 204)"},
        "changes": {"type": "array", "description": "the change-log entries the real call would write",
                    "items": {"type": "object", "required": ["action", "summary"],
                              "properties": {"action": {"type": "string"}, "summary": {"type": "string"}}}},
        "result": {"type": "object", "nullable": True, "additionalProperties": True,
                   "description": "the body the real call would answer (null for a 204); ids in it name rows "
                                  "that were not kept"},
    },
    "required": ["dryRun", "status", "changes", "result"],
}


def asked(request: Request) -> bool:
    value = request.query_params.get(PARAMETER)
    if value is None or value.lower() in _NO:
        return False
    if value.lower() in _YES:
        return True
    raise InvalidInput(PARAMETER, "expected true or false")


def refuse_where_absent(view: Any, request: Request) -> None:
    """A write endpoint without a dry run refuses ?dryRun=true: answering it would make the very change
    the caller meant only to check."""
    if request.method in ("GET", "HEAD", "OPTIONS") or PARAMETER not in request.query_params:
        return
    handler = getattr(view, (request.method or "").lower(), None)
    if asked(request) and not getattr(handler, "rehearsable", False):
        raise InvalidInput(PARAMETER, f"{request.method} {request.path} has no dry run (docs/api.md lists the "
                                      "endpoints that have one); nothing was done")


def rehearsable(method: Callable[..., Response]) -> Callable[..., Response]:
    """A write view method that also answers `?dryRun=true`. Put it above @body: the body's declared
    shape (read by the edge checks) is carried over."""
    @functools.wraps(method)
    def run(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not asked(request):
            return method(view, request, *args, **kwargs)
        with rehearsal.rehearse(view.account.pk) as outcome:
            response = method(view, request, *args, **kwargs)
        return Response({"dryRun": True, "status": response.status_code, "changes": outcome.changes,
                         "result": response.data})

    run.rehearsable = True  # type: ignore[attr-defined]  # read by refuse_where_absent

    parameter = OpenApiParameter(PARAMETER, bool, description=(
        "true: check and rehearse the call without changing anything; 200 with what it would do "
        "(DryRunAnswer), or the very refusal the real call would answer"))
    return extend_schema(parameters=[parameter], extensions={EXTENSION: True})(run)


def document_dry_runs(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: each rehearsable operation also answers 200 DryRunAnswer."""
    result.setdefault("components", {}).setdefault("schemas", {})["DryRunAnswer"] = DRY_RUN_ANSWER
    answer = {"$ref": "#/components/schemas/DryRunAnswer"}
    for operations in result.get("paths", {}).values():
        for op in operations.values():
            if not isinstance(op, dict) or not op.pop(EXTENSION, False):
                continue
            ok = op.setdefault("responses", {}).get("200")
            content = (ok or {}).get("content", {}).get("application/json")
            if content is None:
                op["responses"]["200"] = {"description": "With dryRun=true: what the call would do.",
                                          "content": {"application/json": {"schema": answer}}}
            else:
                content["schema"] = {"anyOf": [content["schema"], answer]}
                ok["description"] = ok.get("description", "") + " With dryRun=true: what the call would do."
    return result

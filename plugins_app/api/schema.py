"""OpenAPI additions generated from the hook table: one context schema per hook."""

from typing import Any

from plugins_app.runtime.tables.context import FIELD_TYPES
from plugins_app.runtime.tables.hooks import HOOKS, HookSpec
from plugins_app.services.execution.execute import HOP_LIMIT
from plugins_app.services.execution.hook_samples import example_context


def context_schema(spec: HookSpec) -> dict[str, Any]:
    properties = {}
    for f in spec.fields:
        prop = dict(FIELD_TYPES[f.type].schema)
        if f.choices:
            prop["enum"] = list(f.choices)
        if f.nullable:
            prop["nullable"] = True
        properties[f.name] = prop
    return {"type": "object", "title": f"{spec.name} context", "description": spec.summary,
            "example": example_context(spec.name), "properties": properties, "required": [f.name for f in spec.fields if not f.optional],
            "additionalProperties": False}


def add_hook_contexts(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    refs = []
    for spec in HOOKS.values():
        name = spec.name[0].upper() + spec.name[1:] + "Context"
        schemas[name] = context_schema(spec)
        refs.append({"$ref": f"#/components/schemas/{name}"})
    execute = result.get("paths", {}).get("/api/v1/hooks/{hook}/execute", {}).get("post")
    if execute:
        for param in execute.get("parameters", []):
            if param["name"] == "hook":
                param["schema"] = {"type": "string", "enum": list(HOOKS)}
        content = execute.get("requestBody", {}).get("content", {}).get("application/json", {})
        body = content.get("schema")
        if body and "$ref" in body:
            target = schemas[body["$ref"].rsplit("/", 1)[1]]
            target["properties"]["context"] = {"oneOf": refs, "description": "the hook's context (see the hook)"}
            target["properties"]["hop"] = {
                "type": "integer", "minimum": 0, "maximum": HOP_LIMIT, "default": 0,
                "description": "How many hook calls deep this one is (a plugin's action that fires a hook adds one)."}
            target["properties"]["turnId"] = {
                "type": "string", "maxLength": 64, "default": "",
                "description": "The platform's id of the agent turn, recorded with cancellations."}
        # One example per hook, from the hook table's realistic samples: Swagger UI offers them in a list.
        content["examples"] = {
            name: {"summary": f"{name}: {spec.summary}",
                   "value": {"context": example_context(name), "hop": 0, "turnId": "turn-8f3a"}}
            for name, spec in HOOKS.items()}
    return result


def page_of(serializer_class, name: str):
    """The OpenAPI shape of a paginated list (APIViews are not paginated by spectacular)."""
    from drf_spectacular.utils import inline_serializer
    from rest_framework import serializers
    return inline_serializer(name, {"count": serializers.IntegerField(),
                                    "next": serializers.URLField(allow_null=True),
                                    "previous": serializers.URLField(allow_null=True),
                                    "results": serializer_class(many=True)})


# Each error answer's codes, by status (plugins_app/errors.py and DRF's own, as api/errors.py answers them).
ERROR_CODES = {
    400: ("invalid", "bad_request", "parse_error", "compile_error", "type_error"),
    401: ("unauthenticated",),
    404: ("not_found", "unknown_hook"),
    409: ("conflict",),
    413: ("payload_too_large",),
    415: ("unsupported_media_type",),
    502: ("platform_error", "ssh_unavailable"),
    503: ("unavailable",),
}
# One real answer per status, shown in the docs instead of "string".
ERROR_EXAMPLES = {
    400: {"code": "invalid", "message": "context.systemPrompt: expected a string", "field": "context.systemPrompt"},
    401: {"code": "unauthenticated", "message": "Authentication credentials were not provided.", "field": None},
    404: {"code": "not_found", "message": "installation 42 not found in this account", "field": None},
    409: {"code": "conflict", "message": "a plugin named 'rm-guard' is already installed in this account",
          "field": None},
    413: {"code": "payload_too_large", "message": "the request body is over the 1 MiB limit", "field": None},
    415: {"code": "unsupported_media_type", "message": "Unsupported media type \"text/plain\" in request.",
          "field": None},
    502: {"code": "platform_error", "message": "the platform could not be reached", "field": None},
    503: {"code": "unavailable", "message": "the database is not answering; send the call again shortly",
          "field": None, "retryAfter": 5},
}

ERROR = {
    "type": "object",
    "description": "Every error answer: a code, a message, and the field it is about (null when none). "
                   "Some errors add details (`hooks`, `errors`, `fields`, `status`, ...). Codes: "
                   + "; ".join(f"{status}: " + ", ".join(f"`{c}`" for c in codes) for status, codes in ERROR_CODES.items())
                   + ".",
    "properties": {"error": {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "what went wrong, in a word a program can test "
                                                                "(see the list above)"},
                       "message": {"type": "string", "description": "what went wrong, for a person"},
                       "field": {"type": "string", "nullable": True,
                                 "description": "the field, parameter or body path the error is about"}},
        "required": ["code", "message", "field"],
    }},
    "required": ["error"],
}

# First path segment under /api/v1/ -> tag.
TAGS = {
    "ping": "keys", "hooks": "hooks", "chains": "chains", "plugins": "plugins", "catalog": "plugins",
    "cancellations": "audit", "warnings": "audit", "usage": "audit", "logs": "audit", "changes": "audit",
    "platform": "platform", "agents": "platform",
    "cron-jobs": "scheduling", "cron-runs": "scheduling", "notifications": "scheduling",
    "ssh-hosts": "ssh", "ssh": "ssh", "sdk": "plugins", "secrets": "secrets", "account": "plugins", "tail": "audit",
    "recorded-calls": "audit",
}
TAG_DESCRIPTIONS = {
    "keys": "Checking an account key.",
    "hooks": "The 14 hooks and running an account's chain for one.",
    "chains": "The order plugins run in, per hook.",
    "plugins": "Installing, enabling, granting and configuring plugins; the official catalog; the SDK's types.",
    "audit": "Cancellations and recorded calls (and replaying them), handler warnings, plugin logs, usage, the change "
             "log and the live tail.",
    "platform": "The platform bridge and the agents the platform registers.",
    "scheduling": "Cron jobs, their runs, and agents' timers.",
    "ssh": "SSH hosts and the gateway that runs agents' SSH operations.",
    "secrets": "Account secrets: write-only values host.fetch puts in requests to their allowed hosts.",
}

# Operations whose view gives no summary of its own.
SUMMARIES = {
    "agents_list": "The account's agents",
    "v1_agents_retrieve": "One agent",
    "v1_agents_update": "Register or replace an agent",
    "v1_agents_destroy": "Forget an agent",
    "v1_cancellations_list": "The cancel log, filtered, newest first",
    "v1_catalog_retrieve": "The official plugins and whether this account installed them",
    "v1_chains_retrieve": "A hook's chain, in order",
    "v1_chains_update": "Reorder a chain, or move one installation in it",
    "v1_cron_jobs_create": "Create a cron job",
    "v1_cron_jobs_retrieve": "One cron job",
    "v1_cron_jobs_destroy": "Delete a cron job",
    "v1_cron_runs_retrieve": "One cron run",
    "v1_logs_list": "What plugins wrote with host.log, newest first",
    "v1_notifications_retrieve": "One timer",
    "v1_ping_retrieve": "Check a key",
    "v1_ping_create": "Check a key (POST)",
    "v1_platform_retrieve": "The platform bridge's address (the secret is never returned)",
    "v1_platform_update": "Set the platform bridge's address and signing secret",
    "plugins_list": "The account's installations",
    "v1_plugins_create": "Install a plugin from source or from the catalog",
    "v1_plugins_retrieve": "One installation",
    "v1_plugins_partial_update": "Enable or disable an installation, or put it (or a draft) in shadow",
    "v1_plugins_destroy": "Uninstall",
    "v1_plugins_grant_create": "Grant an installation its permissions",
    "v1_plugins_settings_partial_update": "Change an official plugin's settings",
    "ssh_hosts_list": "The account's SSH hosts",
    "v1_ssh_hosts_create": "Add an SSH host",
    "v1_ssh_hosts_retrieve": "One SSH host",
    "v1_ssh_hosts_partial_update": "Change an SSH host",
    "v1_ssh_hosts_destroy": "Delete an SSH host",
    "v1_ssh_execute_create": "Run an agent's SSH operation through its hooks",
    "v1_secrets_list": "The account's secrets: names, hosts, who set them and when (never a value)",
    "v1_secrets_destroy": "Delete a secret",
    "v1_usage_list": "Handler runs and time per plugin, hook and day",
    "v1_warnings_list": "Handler warnings, filtered, newest first",
}

# Operations that can answer 409 (a name already used, an object in use, a run already closed).
CONFLICTS = {"v1_plugins_create", "v1_ssh_hosts_create", "v1_ssh_hosts_partial_update", "v1_ssh_hosts_destroy",
             "v1_cron_runs_complete_create", "v1_ssh_execute_create", "v1_plugins_versions_create",
             "v1_plugins_versions_deploy_create", "v1_plugins_rollback_create", "v1_plugins_promote_create",
             "v1_plugins_partial_update"}
# Operations that reach a server outside the hub and answer 502 when it fails.
UPSTREAM = {"v1_ssh_execute_create"}
# Operations without a path id that look up an id from their body (an install names a catalog slug).
BODY_LOOKUPS = {"v1_ssh_execute_create", "v1_plugins_create"}

_ERRORS = {
    400: "The request is malformed: a bad field, parameter, id or body (named in `field`).",
    401: "No key, or not an active account key.",
    404: "No such object in this account (or a path id that names none, an unknown hook, or an unknown "
         "catalog slug).",
    409: "Conflicts with the account's current state.",
    413: "The body is over its limit: 1 MiB (6 MiB for installing a plugin; a secret's value: 8 KiB).",
    415: "The body is not JSON.",
    502: "The server the operation needs could not be reached.",
    503: "A part the hub needs is away for a moment (the database; for execute, the hook engines): nothing "
         "ran or changed. Send it again after the `Retry-After` header's seconds.",
}


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the error shape, each operation's error answers, its tag
    and its summary."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    used = set()
    for path, operations in result.get("paths", {}).items():
        segment = path.removeprefix("/api/v1/").split("/", 1)[0]
        for op in operations.values():
            tag = TAGS.get(segment, segment)
            op["tags"] = [tag]
            used.add(tag)
            if "summary" not in op and op.get("operationId") in SUMMARIES:
                op["summary"] = SUMMARIES[op["operationId"]]
            for status in _error_statuses(op):
                codes = ", ".join(f"`{c}`" for c in ERROR_CODES[status])
                op["responses"].setdefault(str(status), {
                    "description": f"{_ERRORS[status]} Codes: {codes}.",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"},
                                                     "example": {"error": ERROR_EXAMPLES[status]}}}})
    result["tags"] = [{"name": name, "description": TAG_DESCRIPTIONS.get(name, "")}
                      for name in TAG_DESCRIPTIONS if name in used]
    return result


def _error_statuses(op: dict[str, Any]) -> list[int]:
    params = op.get("parameters", [])
    statuses = [400, 401]
    if any(p["in"] == "path" for p in params) or any(p["name"] in ("hook", "page") for p in params) \
            or _is_page(op) or op.get("operationId") in BODY_LOOKUPS:
        statuses.append(404)
    if op.get("operationId") in CONFLICTS:
        statuses.append(409)
    if "requestBody" in op:
        statuses += [413, 415]
    if op.get("operationId") in UPSTREAM:
        statuses.append(502)
    return statuses + [503]   # any operation, during a database outage


def _is_page(op: dict[str, Any]) -> bool:
    ok = op.get("responses", {}).get("200", {}).get("content", {}).get("application/json", {}).get("schema", {})
    return ok.get("$ref", "").endswith("Page") or "Paginated" in ok.get("$ref", "")


def drop_echoed_choice_labels(result: dict[str, Any], generator: Any, request: Any,
                              public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: enum descriptions list each choice with its label; a choice
    whose label is its value ("`unchanged` - unchanged") says nothing, so its line is left out (and a
    description left empty goes)."""
    _drop_echoes(result.get("components", {}))
    return result


def _drop_echoes(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _drop_echoes(item)
        return
    if not isinstance(node, dict):
        return
    description = node.get("description")
    if isinstance(description, str) and "` - " in description:
        kept = "\n".join(line for line in description.splitlines() if not _echoes_its_value(line)).strip()
        if kept:
            node["description"] = kept
        else:
            del node["description"]
    for value in node.values():
        _drop_echoes(value)


def _echoes_its_value(line: str) -> bool:
    value, sep, label = line.removeprefix("* `").partition("` - ")
    return line.startswith("* `") and bool(sep) and value == label


# The page's introduction: what a reader needs before the first call and what the operations alone don't say.
INTRODUCTION = """Accounts' installed plugins and the hook engine that runs them.

## Getting a key
Every call under `/api/v1/` carries an account's key: `Authorization: Bearer mh_...`. An admin issues
one in the admin (**API keys → Add**; the key is shown once, copy it then) or on the server with
`python manage.py create_api_key ACCOUNT_NAME --name WHERE-IT-IS-USED` (the key is the last line
printed). `GET /api/v1/ping` checks it. Press **Authorize** above and paste the key to try calls here.

## The platform's side of a call
`POST /api/v1/hooks/{hook}/execute` answers `outcome`, `value` (the hook's value after the chain; its
shape per hook is in the table below) and `effects`: what the plugins asked the platform to do (a
message for another agent's session, see the `Effect` schema). Act on `outcome` first (a cancelled call
goes no further), then deliver each effect that is not `cancelled`, in order.

## The bridge's signature
Calls the hub makes to the platform (`PUT /api/v1/platform` sets their address and secret) carry
`X-Hub-Timestamp` (Unix seconds) and `X-Hub-Signature: sha256=<hex>`, the HMAC-SHA256 of
`<timestamp>.<raw body>` keyed with the secret. Compute it over the bytes received, compare in constant
time, and refuse a timestamp more than 5 minutes old.

## Errors
Every error is `{"error": {"code", "message", "field"}}` (the `Error` schema), including a path no
endpoint has under `/api/v1/` (404 `not_found`).
"""


def _value_shape(spec: HookSpec) -> str:
    if spec.observe_only:
        return "`null` (observe-only: nothing to change)"
    if spec.single_field:
        field = spec.field_index[spec.single_field]
        return f"the `{field.name}` field, a {field.type}" + (" or null" if field.nullable else "")
    return "an object of " + ", ".join(f"`{f.name}` ({f.type})" for f in spec.mutable_fields())


def value_table() -> str:
    """Markdown: for each hook, what an execute answer's `value` holds."""
    rows = [f"| `{name}` | {_value_shape(spec)} |" for name, spec in HOOKS.items()]
    return "\n".join(["| hook | `value` |", "| --- | --- |", *rows])


def describe_api(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the page's introduction, and `value`'s shape per hook."""
    result.setdefault("info", {})["description"] = INTRODUCTION + "\n### `value` per hook\n" + value_table()
    schemas = result.get("components", {}).get("schemas", {})
    for name in ("ExecuteResponse", "TryResponse"):
        value = schemas.get(name, {}).get("properties", {}).get("value")
        if value is not None:
            value["description"] = (value.get("description", "the hook's value after the chain") +
                                    ". Its shape depends on the hook:\n\n" + value_table())
    return result

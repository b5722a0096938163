"""Running hooks: the key check (ping), the hook table, a chain's execute, its try-run and its explain."""

from typing import cast

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers as drf_serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from middleware_hub.query_deadline import deadline_for
from plugins_app.api.base import AccountView, validated
from plugins_app.api.edge import body
from plugins_app.api.execution import serializers as s
from plugins_app.api.renderers import JSONFirstNegotiation, PlainJSONRenderer
from plugins_app.errors import InvalidInput
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.services.execution import execute as execution
from plugins_app.services.execution import explain, tryit
from plugins_app.services.observability import tracing


class PingView(AccountView):
    """Checks a key: the cheapest authenticated call (also the benchmark's baseline)."""

    @extend_schema(request=None, responses=inline_serializer("Ping", {"ok": drf_serializers.BooleanField(),
                                                                      "accountId": drf_serializers.CharField(),
                                                                      "accountName": drf_serializers.CharField()}))
    def get(self, request: Request) -> Response:
        return Response({"ok": True, "accountId": str(self.account.pk), "accountName": self.account.name})

    post = get


class HookListView(AccountView):
    @extend_schema(responses=OpenApiTypes.OBJECT, summary="The 14 hooks: fields, mutable fields, cancellable")
    def get(self, request: Request) -> Response:
        return Response({"hooks": [spec.as_dict() for spec in HOOKS.values()]})


EXECUTE_DESCRIPTION = """The platform calls this at each of the 14 hook points, with the hook's context.

The account's installations that hook this point run **in chain order**, one after another, each
seeing the value the one before it handed on. A handler may change the value, leave it, or
**cancel**, which stops the chain: then `outcome` is `cancelled`, `cancellation` names the plugin
and its reason, and the platform must not go on with the action.

**Fail-open**: a handler that throws, runs past its time budget or returns the wrong shape is
skipped with a warning (its `trace` entry says which) and the value goes on unchanged; a broken
plugin never takes an agent down.

`hop` counts how deep this call is, 0 to 64 (a plugin's action that fires another hook adds one),
and `turnId` is recorded with any cancellation.

In these docs, pick a hook's example under *Request body*: the `hook` in the path follows it.
"""


class HookExecuteView(AccountView):
    renderer_classes = [PlainJSONRenderer, *(cast(type[BaseRenderer], r) for r in api_settings.DEFAULT_RENDERER_CLASSES
                                             if r is not JSONRenderer)]
    content_negotiation_class = JSONFirstNegotiation

    def dispatch(self, request, *args, **kwargs):
        # Every statement of an execute call is a short one: a database that hangs is answered 503
        # within seconds (middleware_hub/query_deadline.py), the key's lookup included.
        with deadline_for(settings.HUB_DATABASE.execute_deadline_seconds):
            return super().dispatch(request, *args, **kwargs)

    @body(s.ExecuteRequestSerializer, responses=s.ExecuteResponseSerializer,
          summary="Run the account's chain for a hook", description=EXECUTE_DESCRIPTION)
    def post(self, request: Request, hook: str) -> Response:
        run = execution.execute_request(self.account, hook, request.data, traceparent=request.META.get("HTTP_TRACEPARENT"))
        assert run.result is not None, "a finished run has its result"
        # The platform can tell the hub's chain time from the network's (and so can the bench).
        headers = {"Server-Timing": tracing.server_timing(run.chain_ms, run.result.trace), **run.headers()}
        return Response(s.execute_response(run.result, run.effects), headers=headers)


TRY_DESCRIPTION = """Runs the account's chain for a hook on a sample context, optionally with chosen versions
(drafts) in place of live code, and answers each handler's value before and after.

A try-run **writes nothing and acts on nothing**: no cancel log, warnings, plugin logs, usage, strikes
or lane moves, and every host call that writes or reaches outside the hub (`host.fetch` of any method,
`host.llm`, `host.decide`, `host.ssh.command`, workspace writes and deletes, peer messages) is answered
by a stand-in marked `dryRun` and listed in `wouldCall` (reading members, such as a workspace read,
run for real). With `"liveReads": true` the plugins' plain GET/HEAD
fetches are made for real (the account admin's choice: the key's holder).

Try-runs take their account's turns like execute calls (fair admission), and are shed with a 503
`overloaded` and `Retry-After` when they cannot start within the queue deadline.
"""


class HookTryView(AccountView):
    @body(s.TryRequestSerializer, responses=s.TryResponseSerializer,
          summary="Try the account's chain for a hook on a sample, optionally with drafts swapped in; nothing is "
                  "recorded and nothing outside the hub is called", description=TRY_DESCRIPTION)
    def post(self, request: Request, hook: str) -> Response:
        data = request.data if isinstance(request.data, dict) else None
        if data is None or "context" not in data:
            raise InvalidInput("context", "this field is required")
        live_reads = validated(s.TryRequestSerializer, data)["liveReads"]
        run = tryit.try_chain(self.account, hook, data["context"], data.get("versions"), live_reads=live_reads)
        return Response(s.try_response(run))


class HookExplainView(AccountView):
    @body(s.ExplainRequestSerializer, responses=s.ExplainResponseSerializer,
          summary="Explain the account's chain for a hook: for a context, which installations would run and why "
                  "not, in chain order, without running anything")
    def post(self, request: Request, hook: str) -> Response:
        data = request.data if isinstance(request.data, dict) else None
        if data is None or "context" not in data:
            raise InvalidInput("context", "this field is required")
        return Response(s.explain_response(hook, explain.explain(self.account, hook, data["context"])))

"""Request and response shapes of running a hook's chain (execute, try); the chain answer's shape
(`execute_response`, its trace and cancellation) is also what the SSH gateway and timers answer."""

from typing import Any

from rest_framework import serializers

from plugins_app.runtime.web.chain import ChainResult
from plugins_app.services.execution.tryit import TryRun


# Two findings of the DRF stubs, silenced where they stand:
# - a declared field named like a Field attribute (`context`, `source`): the stubs see it override that
#   attribute, but DRF's serializer metaclass takes declared fields out of the class's attributes;
# - a JSONField's default: the stubs accept only a mapping, DRF any JSON value.
class ExecuteRequestSerializer(serializers.Serializer):
    context = serializers.JSONField()  # type: ignore[assignment]  # a field, not Field.context (see above)
    hop = serializers.JSONField(required=False, default=0)  # type: ignore[arg-type]  # any JSON default
    turnId = serializers.JSONField(required=False, default="")  # type: ignore[arg-type]  # any JSON default
    conversation = serializers.JSONField(required=False, help_text="the conversation so far, for "
                                                                   "host.session.conversation.read")


class TraceEntrySerializer(serializers.Serializer):
    installationId = serializers.CharField()
    plugin = serializers.CharField()
    status = serializers.ChoiceField(choices=[
        ("ran", "it ran and answered"), ("cancelled", "it cancelled the action"),
        ("error", "it threw or failed to load; skipped (fail-open)"),
        ("timeout", "it ran past its time budget; skipped"),
        ("malformed", "it returned a value of the wrong shape; skipped"),
        ("quarantined", "it is in quarantine after repeated timeouts; not run"),
        ("skipped", "left out before running: see `reason` (match: the plugin's matcher did not hold)")])
    changed = serializers.BooleanField()
    durationMs = serializers.FloatField()
    warning = serializers.CharField(allow_null=True)
    reason = serializers.ChoiceField(choices=[("match", "the plugin's matcher did not hold for the context")],
                                     required=False, help_text="present only on a skipped handler")


class SourcePositionSerializer(serializers.Serializer):
    line = serializers.IntegerField()
    column = serializers.IntegerField()
    source = serializers.CharField(  # type: ignore[assignment]  # a field, not Field.source
        required=False, help_text="the file, when a bundle's own source map names one")
    handler = serializers.BooleanField(required=False, help_text="true: where the handler is assigned (a timeout "
                                                                 "or a malformed result has no line of its own)")


class TryRequestSerializer(serializers.Serializer):
    context = serializers.JSONField()  # type: ignore[assignment]  # a field, not Field.context
    versions = serializers.JSONField(
        required=False, default=None,
        help_text='{"<installationId>": <version number>}: run these versions (drafts) in place of live code')
    liveReads = serializers.BooleanField(
        required=False, default=False,
        help_text="make the plugins' plain GET/HEAD fetches for real (no body, no method override); every other "
                  "call that writes or reaches outside the hub (fetches that send, llm, decide, SSH, workspace "
                  "writes, peer messages) is still answered by a stand-in and listed in wouldCall")


class TryStepSerializer(serializers.Serializer):
    installationId = serializers.CharField()
    plugin = serializers.CharField()
    # Plain strings here: the same choices as the execute trace's, named once in the schema (there).
    status = serializers.CharField(help_text="as in the execute trace: ran, cancelled, error, timeout, ...")
    reason = serializers.CharField(required=False, help_text="as in the execute trace: why it was skipped")
    changed = serializers.BooleanField()
    durationMs = serializers.FloatField()
    warning = serializers.CharField(allow_null=True)
    version = serializers.IntegerField(allow_null=True, help_text="the version that ran")
    before = serializers.JSONField(help_text="the hook's value before this handler")
    after = serializers.JSONField(help_text="the hook's value after it")
    at = SourcePositionSerializer(allow_null=True, help_text="where in the author's source it failed")
    logs = serializers.ListField(child=serializers.DictField())


class EffectSerializer(serializers.Serializer):
    """Something a plugin did during the chain that the platform must carry out (host.session.peer.send
    records a message for another agent's session): deliver each, in order, after acting on the outcome."""

    type = serializers.ChoiceField(choices=[("peerMessage", "a message for another agent's session")])
    senderSessionId = serializers.CharField(allow_null=True, help_text="the session the message comes from")
    senderAgentId = serializers.CharField(allow_null=True, help_text="the agent that sent it")
    targetSessionId = serializers.CharField(help_text="the session to deliver it to")
    text = serializers.JSONField(help_text="the message as the target's interAgentMessage chain left it")
    cancelled = serializers.BooleanField(help_text="a handler of the target cancelled it: do not deliver")
    reason = serializers.CharField(allow_null=True, help_text="the cancel's reason, when cancelled")
    hop = serializers.IntegerField(help_text="how many hook calls deep the delivery was")


EFFECTS_HELP = ("what the plugins asked the platform to do (today: peer messages), in the order they asked; "
                "the platform delivers each one that is not cancelled")


class TryResponseSerializer(serializers.Serializer):
    hook = serializers.CharField()
    outcome = serializers.CharField(help_text="unchanged, changed or cancelled")
    value = serializers.JSONField()
    versions = serializers.DictField(child=serializers.IntegerField(), help_text="the versions swapped in")
    cancellation = serializers.DictField(allow_null=True)
    trace = TryStepSerializer(many=True)
    effects = EffectSerializer(many=True, help_text="what the chain would have asked the platform to do "
                                                    "(nothing is delivered by a try-run)")
    wouldCall = serializers.ListField(
        child=serializers.DictField(),
        help_text="host calls the try-run did not make: {installationId, plugin, member, args, standIn} (standIn: "
                  "what the plugin was answered instead, marked dryRun), then the platform effects, as {effect}")
    liveReads = serializers.BooleanField(help_text="plain GET/HEAD fetches were made for real")


class ExplainRequestSerializer(serializers.Serializer):
    context = serializers.JSONField()  # type: ignore[assignment]  # a field, not Field.context (see above)


class ExplainStepSerializer(serializers.Serializer):
    installationId = serializers.CharField()
    plugin = serializers.CharField()
    position = serializers.IntegerField()
    runs = serializers.BooleanField(help_text="true: it would run for this context")
    reason = serializers.ChoiceField(allow_null=True, choices=[
        ("disabled", "disabled by an admin"), ("quarantined", "in quarantine after repeated timeouts"),
        ("shadow", "runs in shadow after the chain; its result is never applied"),
        ("match", "its plugin's matcher does not hold for this context")])
    detail = serializers.CharField(allow_null=True, help_text="the reason in words; for match, the condition that failed")
    matcher = serializers.CharField(allow_null=True, help_text="its matcher for this hook in words; null: runs on every call")
    notGranted = serializers.ListField(child=serializers.CharField(),
                                       help_text="permissions its code asks for that this installation was not granted")


class ExplainResponseSerializer(serializers.Serializer):
    hook = serializers.CharField()
    runs = serializers.IntegerField(help_text="how many installations would run")
    chain = ExplainStepSerializer(many=True)


def explain_response(hook: str, steps: list) -> dict[str, Any]:
    return {"hook": hook, "runs": sum(1 for step in steps if step.runs), "chain": [step.as_dict() for step in steps]}


class CancellationSerializer(serializers.Serializer):
    installationId = serializers.CharField()
    plugin = serializers.CharField()
    reason = serializers.CharField()


class ExecuteResponseSerializer(serializers.Serializer):
    hook = serializers.CharField()
    # Labels say what each outcome means: the docs list each choice with its label.
    outcome = serializers.ChoiceField(choices=[
        ("unchanged", "no handler changed the value: go on with the original"),
        ("changed", "the value was changed: go on with `value`"),
        ("cancelled", "a handler cancelled: do not go on (see `cancellation`)")])
    value = serializers.JSONField(help_text="the hook's mutable value(s) after the chain; null for observe-only")
    cancellation = CancellationSerializer(allow_null=True)
    trace = TraceEntrySerializer(many=True)
    effects = EffectSerializer(many=True, help_text=EFFECTS_HELP)


def execute_response(result: ChainResult, effects: list[Any]) -> dict[str, Any]:
    c = result.cancellation
    return {
        "hook": result.hook,
        "outcome": result.outcome,
        "value": result.value,
        "cancellation": None if c is None else {
            "installationId": c.installation_id, "plugin": c.plugin, "reason": c.reason},
        "trace": [{
            "installationId": t.installation_id, "plugin": t.plugin, "status": t.status,
            "changed": t.changed, "durationMs": t.duration_ms, "warning": t.warning,
            **({"reason": t.reason} if t.reason else {}),
        } for t in result.trace],
        "effects": effects,
    }


def try_response(run: TryRun) -> dict[str, Any]:
    """A try-run (services/execution/tryit.py's TryRun) as the try API answers it."""
    return {
        "hook": run.hook,
        "outcome": run.outcome,
        "value": run.after,
        "versions": run.versions,
        "cancellation": None if run.cancelled_by is None else {"plugin": run.cancelled_by, "reason": run.cancel_reason},
        "trace": [{
            "installationId": step.trace.installation_id, "plugin": step.trace.plugin, "status": step.trace.status,
            "changed": step.trace.changed, "durationMs": step.trace.duration_ms, "warning": step.trace.warning,
            "version": step.version, "before": step.before, "after": step.after, "at": step.trace.at,
            "logs": step.trace.logs, **({"reason": step.trace.reason} if step.trace.reason else {}),
        } for step in run.steps],
        "effects": run.effects,
        "wouldCall": run.would_call,
        "liveReads": run.live_reads,
    }

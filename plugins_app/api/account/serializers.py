"""The shapes of the account endpoints' answers that the schema documents (the views build plain dicts)."""

from rest_framework import serializers


class TailEventSerializer(serializers.Serializer):
    """One event of the live tail: the JSON of a Server-Sent Event's `data:` line (its `event:` line holds
    `type`). Comment lines (`: keepalive`) come every few seconds and carry nothing."""

    type = serializers.ChoiceField(choices=[
        ("ready", "the stream is open (first event; `maxSeconds` says how long it lasts)"),
        ("log", "a handler wrote with host.log or console (before its run's event)"),
        ("run", "a handler ran"),
        ("warning", "a handler failed: threw, timed out or answered the wrong shape"),
        ("cancel", "a handler cancelled the chain"),
        ("dropped", "events left out: over the account's rate (`count` says how many)")])
    at = serializers.FloatField(required=False, help_text="when, in Unix seconds")
    hook = serializers.CharField(required=False)
    plugin = serializers.CharField(required=False, help_text="the plugin's slug")
    installationId = serializers.CharField(required=False)
    status = serializers.CharField(required=False, help_text="the handler's trace status")
    version = serializers.IntegerField(required=False, allow_null=True, help_text="the plugin version that ran")
    durationMs = serializers.FloatField(required=False, help_text="run: how long the handler took")
    changed = serializers.BooleanField(required=False, help_text="run: whether it changed the value")
    level = serializers.CharField(required=False, help_text="log: its level")
    message = serializers.CharField(required=False, allow_null=True, help_text="log or warning: its text")
    reason = serializers.CharField(required=False, help_text="cancel: the reason given")
    turnId = serializers.CharField(required=False, allow_blank=True, help_text="cancel: the platform's turn id")
    count = serializers.IntegerField(required=False, help_text="dropped: how many events")
    maxSeconds = serializers.IntegerField(required=False, help_text="ready: how long the stream lasts")
